/**
 * PAYRECON_WEB_USERS for a command that acts as a page user (`close`, `exception decide|approve|reject`,
 * `import --user`): each user with its role and one password, hashed as `payrecon web hash-password` does.
 */
import { hashPassword } from '../../src/web/auth.ts';

export const CLI_PASSWORD = 'a pass phrase for the command line';

/** The JSON of PAYRECON_WEB_USERS: each `name: role`, all with CLI_PASSWORD. */
export async function webUsersJson(
  users: Record<string, 'viewer' | 'operator' | 'controller'>,
): Promise<string> {
  const hash = await hashPassword(CLI_PASSWORD);
  return JSON.stringify(
    Object.entries(users).map(([username, role]) => ({ username, passwordHash: hash, role })),
  );
}

/** The environment of a command acting as one of `users` with the right password. */
export async function actingEnv(
  users: Record<string, 'viewer' | 'operator' | 'controller'>,
): Promise<Record<string, string>> {
  return { PAYRECON_WEB_USERS: await webUsersJson(users), PAYRECON_PASSWORD: CLI_PASSWORD };
}
