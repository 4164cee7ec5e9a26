import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const BIN = new URL('../../../bin/payrecon.mjs', import.meta.url).pathname;

let child: ChildProcess | undefined;
let dataDir: string | undefined;
afterEach(() => {
  child?.kill('SIGTERM');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

function firstLine(proc: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const newline = out.indexOf('\n');
      if (newline >= 0) resolve(out.slice(0, newline));
    });
    proc.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    proc.once('exit', (code) => reject(new Error(`registry exited with ${code}: ${err}`)));
  });
}

describe('payrecon registry', () => {
  it('prints the chosen port with --port 0 and serves the registry there', async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'payrecon-registry-cli-'));
    child = spawn(process.execPath, [BIN, 'registry', '--port', '0', '--data-dir', dataDir], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const line = await firstLine(child);
    const match = /listening on (http:\/\/127\.0\.0\.1:(\d+))/.exec(line);
    expect(match, line).not.toBeNull();
    expect(Number(match![2])).toBeGreaterThan(0);
    const res = await fetch(`${match![1]}/config`);
    expect(await res.json()).toEqual({ compatibilityLevel: 'BACKWARD' });
    const exited = new Promise((resolve) => child!.once('exit', resolve));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
