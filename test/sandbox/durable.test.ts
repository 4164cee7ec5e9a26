/**
 * The durable sandbox as a process (`payrecon sandbox --data-dir DIR`): entities created over HTTP,
 * then SIGKILL (in the middle of a burst of creations) or SIGTERM, then a start on the same directory.
 * Everything that was answered is there and answered the same, ids continue, idempotency keys and
 * settings are kept; a second sandbox on a directory in use is refused.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/wait.ts';
import { cardBody, cashoutBody, cashoutCall, control, oneShotBody, signed } from './helpers.ts';

const root = mkdtempSync(join(tmpdir(), 'payrecon-sandbox-durable-'));
const children = new Set<ChildProcess>();

afterAll(async () => {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    }
  }
  rmSync(root, { recursive: true, force: true });
});

interface Proc {
  child: ChildProcess;
  url: string;
  ccUrl: string;
  stderr: () => string;
}

async function startProc(dataDir: string, extra: string[] = []): Promise<Proc> {
  const child = spawn(
    process.execPath,
    [
      'bin/payrecon.mjs',
      'sandbox',
      '--port',
      '0',
      '--cc-port',
      '0',
      '--seed',
      '3',
      '--data-dir',
      dataDir,
      ...extra,
    ],
    {
      cwd: join(import.meta.dirname, '../..'),
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LOG_LEVEL: 'silent' },
    },
  );
  children.add(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (c) => {
    out += c;
  });
  child.stderr!.on('data', (c) => {
    err += c;
  });
  await waitFor(
    () => `the sandbox to start: ${out} ${err}`,
    () => /sandbox card api (\S+)/.test(out) || child.exitCode !== null,
    30_000,
  );
  if (!/sandbox card api (\S+)/.test(out)) throw new Error(`sandbox did not start: ${out} ${err}`);
  return {
    child,
    url: /sandbox api (\S+)/.exec(out)![1]!,
    ccUrl: /sandbox card api (\S+)/.exec(out)![1]!,
    stderr: () => err,
  };
}

async function stop(p: Proc, signal: NodeJS.Signals): Promise<number | null> {
  const exited = new Promise<number | null>((r) => p.child.once('exit', (code) => r(code)));
  p.child.kill(signal);
  return exited;
}

interface Seen {
  deposits: Map<number, string>;
  cashouts: Map<number, string>;
  refunds: Map<number, string>;
  idempotent: { key: string; body: Record<string, unknown>; answer: unknown }[];
}

const depositStatus = (url: string, id: number) => signed(url, `/v3/deposits/${id}`);
const cashoutStatus = (url: string, id: number) => cashoutCall(url, '/v3/cashout/status', { cashout_id: id });
const refundStatus = (url: string, id: number) => signed(url, `/v3/refunds/${id}`);

/** Creates entities of every kind and moves some; returns every answer the sandbox gave. */
async function populate(p: Proc, tag: string): Promise<Seen> {
  const seen: Seen = { deposits: new Map(), cashouts: new Map(), refunds: new Map(), idempotent: [] };
  for (let i = 0; i < 6; i++) {
    const body = oneShotBody({ invoice_id: `${tag}-dep-${i}`, amount: 100 + i });
    const key = `${tag}-key-${i}`;
    const res = await signed(p.url, '/v3/deposits', { body, idempotencyKey: key });
    expect(res.status).toBe(200);
    seen.idempotent.push({ key, body, answer: res.json });
  }
  const card = await signed(p.ccUrl, '/v3/deposits', {
    body: cardBody('4111111111111111', { invoice_id: `${tag}-card` }),
  });
  expect(card.status).toBe(200);
  const cardId = card.json.deposit_id as number;
  const firstId = (seen.idempotent[0]!.answer as { deposit_id: number }).deposit_id;
  expect((await control(p.url, `/deposits/${firstId}/pay`, {})).status).toBe(200);
  const secondId = (seen.idempotent[1]!.answer as { deposit_id: number }).deposit_id;
  expect((await control(p.url, `/deposits/${secondId}/expire`, {})).status).toBe(200);
  const cashoutIds: number[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await cashoutCall(p.url, '/v3/cashout', cashoutBody({ external_id: `${tag}-co-${i}` }));
    expect(res.status).toBe(200);
    cashoutIds.push(Number(res.json.cashout_id));
  }
  expect((await control(p.url, `/cashouts/${cashoutIds[0]}/deliver`, {})).status).toBe(200);
  expect((await control(p.url, `/cashouts/${cashoutIds[0]}/confirm`, {})).status).toBe(200);
  const refund = await signed(p.url, '/v3/refunds', { body: { deposit_id: cardId, amount: 10 } });
  expect(refund.status).toBe(200);
  for (const d of [...seen.idempotent.map((x) => (x.answer as { deposit_id: number }).deposit_id), cardId]) {
    seen.deposits.set(d, (await depositStatus(p.url, d)).text);
  }
  for (const c of cashoutIds) seen.cashouts.set(c, (await cashoutStatus(p.url, c)).text);
  seen.refunds.set(refund.json.refund_id, (await refundStatus(p.url, refund.json.refund_id)).text);
  return seen;
}

async function expectSame(p: Proc, seen: Seen): Promise<void> {
  for (const [id, text] of seen.deposits) expect((await depositStatus(p.url, id)).text).toBe(text);
  for (const [id, text] of seen.cashouts) expect((await cashoutStatus(p.url, id)).text).toBe(text);
  for (const [id, text] of seen.refunds) expect((await refundStatus(p.url, id)).text).toBe(text);
  // The same idempotency key and body give the first answer again.
  for (const { key, body, answer } of seen.idempotent) {
    const again = await signed(p.url, '/v3/deposits', { body, idempotencyKey: key });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(answer);
  }
}

function maxId(m: Map<number, string>): number {
  return Math.max(...m.keys());
}

describe('payrecon sandbox --data-dir', () => {
  it('keeps everything it answered across SIGKILL (even mid-burst), ids continue, settings stay', async () => {
    const dir = join(root, 'kill');
    const first = await startProc(dir);
    const seen = await populate(first, 'k1');
    const faults = { webhooks: { dropRate: 0.25, delayMs: 1000 } };
    expect((await control(first.url, '/faults', faults, 'PUT')).status).toBe(200);
    expect((await control(first.url, '/auto', { enabled: false, minDelayMs: 1234 }, 'PUT')).status).toBe(200);

    // Creations from 16 workers without pause, killed while requests are in flight: every one answered
    // 200 must survive.
    const answered = new Map<number, string>();
    const unanswered: { invoice: string; body: Record<string, unknown> }[] = [];
    let n = 0;
    let killed = false;
    const worker = async () => {
      while (!killed) {
        const invoice = `burst-${n++}`;
        const body = oneShotBody({ invoice_id: invoice, amount: 10 + (n % 50) });
        try {
          const res = await signed(first.url, '/v3/deposits', { body, idempotencyKey: `key-${invoice}` });
          if (res.status === 200) answered.set(res.json.deposit_id, invoice);
        } catch {
          unanswered.push({ invoice, body }); // The connection died with the process: never answered.
          return;
        }
      }
    };
    const workers = Array.from({ length: 16 }, worker);
    await waitFor('100 answered creations', () => answered.size >= 100, { ms: 30_000, every: 5 });
    expect(await stop(first, 'SIGKILL')).toBeNull();
    killed = true;
    await Promise.all(workers);
    expect(n - answered.size).toBeGreaterThan(0);

    const second = await startProc(dir);
    await expectSame(second, seen);
    for (const [id, invoice] of answered) {
      const res = await depositStatus(second.url, id);
      expect(res.status).toBe(200);
      expect(res.json.invoice_id ?? res.json.merchant_invoice_id).toBe(invoice);
    }
    // A request the kill left unanswered, sent again with its idempotency key, is answered 200: either
    // created now, or (created and stored with its key before the kill) the first answer.
    for (const { invoice, body } of unanswered) {
      const res = await signed(second.url, '/v3/deposits', { body, idempotencyKey: `key-${invoice}` });
      expect(res.status).toBe(200);
    }
    // Ids never repeat: the next deposit and cashout come after everything seen before the kill.
    const next = await signed(second.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'after-kill' }),
    });
    expect(next.status).toBe(200);
    expect(next.json.deposit_id).toBeGreaterThan(Math.max(maxId(seen.deposits), ...answered.keys()));
    const co = await cashoutCall(second.url, '/v3/cashout', cashoutBody({ external_id: 'after-kill' }));
    expect(Number(co.json.cashout_id)).toBeGreaterThan(maxId(seen.cashouts));
    // A used invoice_id and external_id stay used.
    const dup = await signed(second.url, '/v3/deposits', { body: oneShotBody({ invoice_id: 'k1-dep-3' }) });
    expect(dup.status).toBe(400);
    const dupCo = await cashoutCall(second.url, '/v3/cashout', cashoutBody({ external_id: 'k1-co-1' }));
    expect(dupCo.json.code).toBe(511);
    // Settings and histories.
    expect((await control(second.url, '/faults')).json.webhooks).toMatchObject(faults.webhooks);
    expect((await control(second.url, '/auto')).json.minDelayMs).toBe(1234);
    const firstDeposit = (seen.idempotent[0]!.answer as { deposit_id: number }).deposit_id;
    const record = await control(second.url, `/deposits/${firstDeposit}`);
    expect(record.json.history.map((h: { to: string }) => h.to)).toEqual(['PENDING', 'COMPLETED']);
    expect(await stop(second, 'SIGTERM')).toBe(0);
  }, 120_000);

  it('keeps everything across SIGTERM, writes a snapshot and refuses a second sandbox on the directory', async () => {
    const dir = join(root, 'term');
    const first = await startProc(dir);
    const seen = await populate(first, 't1');
    // The directory is locked while its sandbox runs.
    const refused = spawn(
      process.execPath,
      ['bin/payrecon.mjs', 'sandbox', '--port', '0', '--cc-port', '0', '--data-dir', dir],
      {
        cwd: join(import.meta.dirname, '../..'),
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, LOG_LEVEL: 'silent' },
      },
    );
    children.add(refused);
    let refusedErr = '';
    refused.stderr!.on('data', (c) => {
      refusedErr += c;
    });
    const code = await new Promise<number | null>((r) => refused.once('exit', r));
    expect(code).toBe(1);
    expect(refusedErr.trim()).toMatch(
      /^payrecon: sandbox: --data-dir: data directory .* is in use by process \d+$/,
    );

    expect(await stop(first, 'SIGTERM')).toBe(0);
    const files = readdirSync(dir);
    expect(files.some((f) => f.startsWith('snapshot-'))).toBe(true);
    expect(existsSync(join(dir, 'LOCK'))).toBe(false);

    const second = await startProc(dir);
    await expectSame(second, seen);
    const next = await signed(second.url, '/v3/deposits', {
      body: oneShotBody({ invoice_id: 'after-term' }),
    });
    expect(next.json.deposit_id).toBeGreaterThan(maxId(seen.deposits));
    // Moves keep working on restored records: the expired deposit can still be paid late.
    const expired = (seen.idempotent[1]!.answer as { deposit_id: number }).deposit_id;
    expect((await control(second.url, `/deposits/${expired}/late-payment`, {})).status).toBe(200);
    expect((await depositStatus(second.url, expired)).json.status).toBe('COMPLETED');
    expect(await stop(second, 'SIGKILL')).toBeNull();
    const third = await startProc(dir);
    expect((await depositStatus(third.url, expired)).json.status).toBe('COMPLETED');
    expect(await stop(third, 'SIGTERM')).toBe(0);
  }, 120_000);
});
