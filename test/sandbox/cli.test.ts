import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { cashoutBody, cashoutCall } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'payrecon-sandbox-cli-'));
let child: ChildProcess | undefined;

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('payrecon sandbox (CLI)', () => {
  it('starts on free ports, prints them, loads --accounts and stops on SIGTERM', async () => {
    const accountsFile = join(dir, 'accounts.json');
    writeFileSync(
      accountsFile,
      JSON.stringify([
        {
          name: 'shop2',
          login: 'shop2-login',
          depositSecret: 'shop2-secret',
          cashoutLogin: 'shop2-co',
          cashoutPass: 'shop2-pass',
          cashoutSecret: 'shop2-co-secret',
          readOnlyKey: 'shop2-ro',
          notificationUrl: 'http://127.0.0.1:9/hooks',
        },
      ]),
    );
    child = spawn(
      process.execPath,
      [
        'bin/payrecon.mjs',
        'sandbox',
        '--port',
        '0',
        '--cc-port',
        '0',
        '--seed',
        '5',
        '--accounts',
        accountsFile,
      ],
      {
        cwd: join(import.meta.dirname, '../..'),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'silent' },
      },
    );
    let out = '';
    child.stdout!.on('data', (c) => {
      out += c;
    });
    await waitFor(
      () => `the sandbox to start: ${out}`,
      () => /sandbox card api (\S+)/.test(out) || child!.exitCode !== null,
      20_000,
    );
    if (!/sandbox card api (\S+)/.test(out)) throw new Error(`sandbox did not start: ${out}`);
    const url = /sandbox api (\S+)/.exec(out)![1]!;
    const ccUrl = /sandbox card api (\S+)/.exec(out)![1]!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ccUrl).not.toBe(url);
    const banks = await request(`${url}/v3/banks?country=CL`, {
      headers: { authorization: 'Bearer shop2-ro' },
    });
    expect(banks.statusCode).toBe(200);
    await banks.body.dump();
    const raw = JSON.stringify({ login: 'shop2-co', pass: 'shop2-pass', ...cashoutBody() });
    expect((await cashoutCall(url, '/v3/cashout', {}, { raw, secret: 'shop2-co-secret' })).status).toBe(200);
    const exited = new Promise<number | null>((r) => child!.once('exit', r));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
