/**
 * Who a command acts as. A command that signs or decides in a user's name (`close prepare|approve`,
 * `exception decide|approve|reject`, `match --line|--undo`, `import --user`) acts as a user of
 * PAYRECON_WEB_USERS whose password it checks, with the role the action needs (src/domain/roles.ts), or
 * refuses in one line (exit code 2) before it opens the database. With PAYRECON_WEB_USERS unset, the users
 * are those the page of a running `payrecon up` signs in against the sandbox (its endpoints file says so),
 * when the command works on that instance's database: the same users, passwords and roles as the page.
 * The password comes from `--password-file FILE` (mode 0600 or stricter), else PAYRECON_PASSWORD, else a
 * prompt without echo when stdin is a terminal. The password is never printed, logged or stored.
 */
import { readFileSync, statSync } from 'node:fs';
import { userInfo } from 'node:os';
import { UsageError } from './cli-errors.ts';
import { type Config, localUser } from './config.ts';
import { DEFAULT_WEB_ROLE, roleCan, type WebPermission, type WebRole } from './domain/roles.ts';
import { runningEndpoints } from './endpoints.ts';
import { SANDBOX_WEB_USERS, sandboxWebUsers } from './sandbox-part.ts';
import { authenticate, type WebUser } from './web/auth.ts';

export interface CliUserOptions {
  /** `--user`: the page user to act as (default: the operating-system user, USER). */
  user?: string;
  /** `--password-file`: a file holding the password (its final newline is not part of it). */
  passwordFile?: string;
}

/** What the action needs, in words, for the refusal. */
const NEEDS: Record<WebPermission, string> = {
  'work-exceptions': 'an operator or a controller',
  'import-files': 'an operator or a controller',
  'sign-close': 'a controller',
  'approve-booking': 'a controller',
};

/** The identity of a command run without `--user` where no user is needed: `cli:<system user>`. */
export function systemIdentity(): string {
  let name: string | null = null;
  try {
    name = userInfo().username;
  } catch {
    name = localUser();
  }
  return `cli:${name || 'unknown'}`;
}

/** The password of the file, refused when others than its owner may read it. */
function passwordFromFile(path: string): string {
  let mode: number;
  try {
    mode = statSync(path).mode;
  } catch (err) {
    throw new UsageError(
      '--password-file',
      `${path}: ${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`,
    );
  }
  if ((mode & 0o077) !== 0) {
    throw new UsageError(
      '--password-file',
      `${path}: readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it`,
    );
  }
  return readFileSync(path, 'utf8').replace(/\r?\n$/, '');
}

/** Reads a line from the terminal without echoing it. */
function promptPassword(prompt: string): Promise<string> {
  const stdin = process.stdin;
  return new Promise((resolve, reject) => {
    let typed = '';
    // Echo off before the prompt shows, so nothing typed after it is echoed.
    stdin.setRawMode(true);
    stdin.resume();
    stdin.setEncoding('utf8');
    process.stderr.write(prompt);
    const done = (err: Error | null) => {
      stdin.setRawMode(false);
      stdin.pause();
      stdin.off('data', onData);
      process.stderr.write('\n');
      if (err) reject(err);
      else resolve(typed);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done(null);
        if (ch === '\u0003') return done(new UsageError('password', 'not given (interrupted)'));
        if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1);
        else typed += ch;
      }
    };
    stdin.on('data', onData);
  });
}

async function passwordOf(config: Config, opts: CliUserOptions, username: string): Promise<string> {
  if (opts.passwordFile !== undefined) return passwordFromFile(opts.passwordFile);
  if (config.cli.password !== null) return config.cli.password;
  if (process.stdin.isTTY) return promptPassword(`password of ${username}: `);
  throw new UsageError(
    'password',
    `none given for ${username}: set PAYRECON_PASSWORD, give --password-file FILE, or run at a terminal`,
  );
}

/**
 * The users a command may act as: PAYRECON_WEB_USERS; else, when a `payrecon up` on this data directory
 * signs in the sandbox's users and the command works on its database (DATABASE_URL unset, or that one),
 * those users. `names` are known before any password is hashed; `users()` hashes them.
 */
function usersOf(config: Config): {
  from: string;
  names: readonly string[];
  users: () => Promise<readonly WebUser[]>;
} | null {
  if (config.web.users.length > 0) {
    const configured = config.web.users;
    return {
      from: 'PAYRECON_WEB_USERS',
      names: configured.map((u) => u.username),
      users: async () => configured,
    };
  }
  const running = runningEndpoints(config.dataDir, (line) => process.stderr.write(`payrecon: ${line}\n`));
  if (running?.sandboxUsers !== true) return null;
  if (config.database.url !== null && config.database.url !== running.databaseUrl) return null;
  return {
    from: `the sandbox's users of payrecon up (pid ${running.pid})`,
    names: SANDBOX_WEB_USERS.map((u) => u.username),
    users: () => sandboxWebUsers(),
  };
}

/**
 * The user `--user` names (default USER), of PAYRECON_WEB_USERS or of the sandbox's under `payrecon up`
 * (`usersOf`), its password checked and its role able to do `permission`; else a usage error naming why.
 * `what` names the action in the refusal.
 */
export async function actingUser(
  config: Config,
  opts: CliUserOptions,
  permission: WebPermission,
  what: string,
): Promise<{ username: string; role: WebRole }> {
  const username = (opts.user ?? localUser() ?? '').trim();
  if (username === '') throw new UsageError('--user', `${what}: give the page user to act as`);
  const source = usersOf(config);
  if (source === null) {
    throw new UsageError(
      'PAYRECON_WEB_USERS',
      `no users configured: ${what} acts as a configured user (\`payrecon web hash-password\`), or as a sandbox user beside a running \`payrecon up\` against the sandbox`,
    );
  }
  if (!source.names.includes(username)) {
    throw new UsageError('--user', `${username}: no such user in ${source.from}`);
  }
  const password = await passwordOf(config, opts, username);
  const user = await authenticate(await source.users(), username, password);
  if (!user) throw new UsageError('--user', `${username}: wrong password`);
  const role = user.role ?? DEFAULT_WEB_ROLE;
  if (!roleCan(role, permission)) {
    throw new UsageError(
      '--user',
      `${username} is ${role === 'operator' ? 'an' : 'a'} ${role}: ${what} needs ${NEEDS[permission]}`,
    );
  }
  return { username, role };
}
