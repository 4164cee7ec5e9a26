/**
 * `payrecon web hash-password`: reads a password from stdin and prints the scrypt hash to put in
 * PAYRECON_WEB_USERS. (`payrecon web` itself is composed with the other commands, in src/commands.ts.)
 */
import { createInterface } from 'node:readline';
import { AppError } from '../domain/errors.ts';
import { hashPassword } from './auth.ts';

async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Password (input is not hidden; pipe it to avoid echo): ');
  const rl = createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    rl.close();
    return line;
  }
  return '';
}

export async function runHashPasswordCli(): Promise<void> {
  const password = await readPassword();
  if (password.length < 8) throw new AppError('VALIDATION_FAILED', 'password: at least 8 characters');
  process.stdout.write(`${await hashPassword(password)}\n`);
}
