/**
 * The one error path of the `payrecon` command: every expected failure (configuration, arguments,
 * connection refused, missing file, port in use, locked data directory, invalid period or time zone)
 * becomes one line `payrecon: <what>: <rule or cause>` on stderr and an exit code, 2 for usage errors
 * (bad arguments or configuration) and 1 otherwise. `--verbose` or LOG_LEVEL=debug adds the stack.
 */
import { AppError } from './domain/errors.ts';

/** A bad command line or configuration: exit code 2. */
export class UsageError extends AppError {
  constructor(what: string, rule: string) {
    super('VALIDATION_FAILED', `${what}: ${rule}`, { details: { what, rule } });
    this.name = 'UsageError';
  }
}

export interface Failure {
  /** The line without the `payrecon: ` prefix. */
  message: string;
  exitCode: 1 | 2;
}

const USAGE_CODES = new Set(['CONFIG_INVALID', 'VALIDATION_FAILED', 'INVALID_AMOUNT']);

interface SystemError {
  code?: string;
  syscall?: string;
  address?: string;
  port?: number;
  path?: string;
  message?: string;
  errors?: unknown[];
}

function firstLine(text: string): string {
  return text.split('\n')[0]?.trim() ?? '';
}

/** A Node system error (ECONNREFUSED, EADDRINUSE, ENOENT ...) as `<what>: <cause>`, or null. */
function systemFailure(err: SystemError): string | null {
  // Connecting to "localhost" tries ::1 and 127.0.0.1 and fails with both in an AggregateError.
  if (!err.code && Array.isArray(err.errors) && err.errors.length > 0) {
    return systemFailure(err.errors[err.errors.length - 1] as SystemError);
  }
  const where = err.address !== undefined ? `${err.address}${err.port ? `:${err.port}` : ''}` : null;
  switch (err.code) {
    case 'ECONNREFUSED':
      return `${where ?? 'server'}: connection refused (is it running?)`;
    case 'ETIMEDOUT':
    case 'ECONNRESET':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${where ?? 'server'}: ${err.code === 'ETIMEDOUT' ? 'connection timed out' : 'unreachable'}`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${firstLine(err.message ?? '').replace(/^getaddrinfo \w+ /, '') || 'host'}: host not found`;
    case 'EADDRINUSE':
      return `${where ?? 'port'}: port in use (another payrecon, or another program, listens there)`;
    case 'EADDRNOTAVAIL':
      return `${where ?? 'address'}: address not available on this machine`;
    case 'EACCES':
    case 'EPERM':
      return err.syscall === 'listen'
        ? `${where ?? 'port'}: permission denied (ports below 1024 need privileges)`
        : `${err.path ?? 'file'}: permission denied`;
    case 'ENOENT':
      return `${err.path ?? 'file'}: no such file or directory`;
    case 'EISDIR':
      return `${err.path ?? 'path'}: is a directory`;
    case 'ENOTDIR':
      return `${err.path ?? 'path'}: not a directory`;
    default:
      return null;
  }
}

/** PostgreSQL's own errors (they carry a SQLSTATE `code` of five characters). */
function postgresFailure(err: { code?: string; message?: string }): string | null {
  if (typeof err.code !== 'string' || !/^[0-9A-Z]{5}$/.test(err.code)) return null;
  const message = firstLine(err.message ?? '');
  switch (err.code.slice(0, 2)) {
    case '28':
      return `database: ${message} (check DATABASE_URL's user and password)`;
    case '3D':
      return `database: ${message} (create it, or fix DATABASE_URL)`;
    case '57':
    case '08':
      return `database: ${message}`;
    default:
      return `database: ${message} (SQLSTATE ${err.code})`;
  }
}

/** How an error is told to a person: one line and an exit code. */
export function describeFailure(err: unknown): Failure {
  if (err instanceof AppError) {
    // A cause from the system (a refused connection under an AppError) is the more useful line.
    return {
      message: firstLine(err.message),
      exitCode: USAGE_CODES.has(err.code) ? 2 : 1,
    };
  }
  if (err && typeof err === 'object') {
    const e = err as SystemError & { name?: string; exitCode?: number };
    const system = systemFailure(e);
    if (system) return { message: system, exitCode: 1 };
    const pgMessage = postgresFailure(e);
    if (pgMessage) return { message: pgMessage, exitCode: 1 };
    const message = firstLine(e.message ?? '');
    if (message) return { message, exitCode: 1 };
  }
  if (err === undefined || err === null) return { message: 'failed (no error given)', exitCode: 1 };
  return { message: firstLine(String(err)) || 'failed', exitCode: 1 };
}

/** True when the stack should be printed: `--verbose` on the command line or LOG_LEVEL=debug|trace. */
export function verboseRequested(argv: readonly string[], logLevel: string | undefined): boolean {
  return argv.includes('--verbose') || logLevel === 'debug' || logLevel === 'trace';
}

/** Writes the failure's line (and the stack when verbose) to stderr and returns the exit code. */
export function reportFailure(
  err: unknown,
  options: { verbose: boolean; write?: (text: string) => void },
): 1 | 2 {
  const write = options.write ?? ((text: string) => process.stderr.write(text));
  const failure = describeFailure(err);
  const message = failure.message.startsWith('payrecon: ') ? failure.message.slice(10) : failure.message;
  write(`payrecon: ${message}\n`);
  if (options.verbose && err instanceof Error && err.stack) {
    write(`${err.stack}\n`);
    let cause = err.cause;
    while (cause instanceof Error) {
      write(`caused by: ${cause.stack ?? cause.message}\n`);
      cause = cause.cause;
    }
  }
  return failure.exitCode;
}
