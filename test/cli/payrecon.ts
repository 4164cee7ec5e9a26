/**
 * The real `payrecon` bin as a child process with a clean environment: no addresses from the test's own
 * environment, a data directory of its own under `cwd`.
 */
import { spawn } from 'node:child_process';
import { join, resolve } from 'node:path';

export const BIN = resolve(import.meta.dirname, '../../bin/payrecon.mjs');

export interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a command run in `cwd`: the test's own without its addresses, then `env`. */
export function commandEnv(cwd: string, env: Record<string, string> = {}): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (/^(PAYRECON_|DATABASE_URL|KAFKA_|SCHEMA_REGISTRY_URL|LOG_LEVEL)/.test(k)) continue;
    base[k] = v;
  }
  return { ...base, PAYRECON_DATA_DIR: join(cwd, 'data'), ...env };
}

export function payrecon(
  cwd: string,
  args: string[],
  env: Record<string, string> = {},
  stdin = '',
): Promise<Result> {
  return new Promise((resolveRun, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: commandEnv(cwd, env),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => {
      stdout += c;
    });
    child.stderr.on('data', (c) => {
      stderr += c;
    });
    child.on('error', reject);
    child.on('close', (code) => resolveRun({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}
