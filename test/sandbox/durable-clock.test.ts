/**
 * What a durable sandbox owes on its clock survives a restart: a notification waiting for its retry is
 * sent after the restart at its time, the clock resumes where it stopped, an unpaid deposit still expires
 * and is cancelled 7 days later, planned late rejections (826) and late completions still happen.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/sandbox/clock.ts';
import { type RunningSandbox, startSandbox } from '../../src/sandbox/main.ts';
import { waitFor } from '../helpers/wait.ts';
import { cashoutBody, cashoutCall, control, oneShotBody, signed, startReceiver } from './helpers.ts';

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const root = mkdtempSync(join(tmpdir(), 'payrecon-sandbox-durable-clock-'));
const open: RunningSandbox[] = [];

afterAll(async () => {
  for (const sb of open) await sb.close();
  rmSync(root, { recursive: true, force: true });
});

async function start(dataDir: string, clock: ManualClock, extra: Parameters<typeof startSandbox>[0] = {}) {
  const sb = await startSandbox({ seed: 9, clock, dataDir, ...extra });
  open.push(sb);
  return sb;
}

describe('durable sandbox: clock, retries and late moves across a restart', () => {
  it('sends a pending retry after a restart, at its time, and resumes the clock', async () => {
    const dir = join(root, 'retry');
    const failing = await startReceiver(() => 503);
    const t0 = Date.now();
    const clock1 = new ManualClock(t0);
    const sb1 = await start(dir, clock1, {
      defaultNotificationUrl: `${failing.url}/hooks`,
    });
    const dep = await signed(sb1.url, '/v3/deposits', { body: oneShotBody({ expiration: 30 }) });
    const id = dep.json.deposit_id as number;
    expect((await control(sb1.url, `/deposits/${id}/pay`, {})).status).toBe(200);
    // The first attempt fails: a retry is planned 5 minutes later.
    await waitFor('the first attempt', () => failing.received.length > 0, { ms: 2000, every: 20 });
    expect(failing.received.length).toBe(1);
    await sb1.control.deps.webhooks.idle();
    await clock1.advance(2 * MIN);
    await sb1.close();
    await failing.close();

    // Restart with a clock that starts earlier: the sandbox's time does not go back.
    const ok = await startReceiver(() => 200);
    const clock2 = new ManualClock(t0);
    const sb2 = await start(dir, clock2, { defaultNotificationUrl: `${ok.url}/hooks` });
    expect(clock2.now()).toBe(t0 + 2 * MIN);
    expect(sb2.control.restored?.deliveries).toBe(1);
    // The stored attempt goes where the notification base URL points now (the pipeline may have moved).
    expect((await control(sb2.url, '/webhooks/base-url', { url: ok.url }, 'PUT')).status).toBe(200);
    await clock2.advance(2 * MIN);
    await sb2.control.deps.webhooks.idle();
    expect(ok.received.length).toBe(0);
    await clock2.advance(1 * MIN);
    await waitFor('the retried notification', () => ok.received.length > 0, { ms: 2000, every: 20 });
    expect(ok.received.map((r) => r.body)).toEqual([`{"deposit_id":${id}}`]);
    await sb2.control.deps.webhooks.idle();
    expect(sb2.control.deps.webhooks.pending.size).toBe(0);
    await ok.close();
  });

  it('expires and cancels an unpaid deposit, late-rejects (826) and late-completes across restarts', async () => {
    const dir = join(root, 'moves');
    const t0 = Date.UTC(2026, 5, 1, 12);
    const clock1 = new ManualClock(t0);
    const sb1 = await start(dir, clock1, {
      faults: { lateRejection: { cashoutRate: 1, refundRate: 0, delayMs: 2 * DAY } },
      auto: { enabled: true, lateCompletionRate: 1, lateCompletionDelayMs: [3 * DAY, 3 * DAY] },
    });
    // Automatic moves would pay the deposit: give it nothing to do but expire.
    await control(
      sb1.url,
      '/auto',
      {
        ...(await control(sb1.url, '/auto')).json,
        deposit: { pay: 0, amountMismatch: 0, thirdParty: 0, review: 0, decline: 0, none: 1 },
      },
      'PUT',
    );
    const unpaid = (await signed(sb1.url, '/v3/deposits', { body: oneShotBody({ expiration: 30 }) })).json
      .deposit_id as number;
    const cashout = Number((await cashoutCall(sb1.url, '/v3/cashout', cashoutBody())).json.cashout_id);
    await control(sb1.url, '/auto', { ...(await control(sb1.url, '/auto')).json, enabled: false }, 'PUT');
    await control(sb1.url, `/cashouts/${cashout}/deliver`, {});
    await control(sb1.url, `/cashouts/${cashout}/confirm`, {});
    await control(sb1.url, '/auto', { ...(await control(sb1.url, '/auto')).json, enabled: true }, 'PUT');
    await clock1.advance(10 * MIN);
    await sb1.close();

    // Restart: the expiry (20 minutes away) and the late rejection (2 days) are still owed.
    const clock2 = new ManualClock(t0);
    const sb2 = await start(dir, clock2);
    await clock2.advance(25 * MIN);
    expect((await signed(sb2.url, `/v3/deposits/${unpaid}`)).json.status).toBe('EXPIRED');
    await clock2.advance(2 * DAY);
    const co = await cashoutCall(sb2.url, '/v3/cashout/status', { cashout_id: cashout });
    expect(co.json.cashout_status).toBe(3);
    expect(co.json.rejection_code).toBe(826);
    expect(co.json.rejection_reason).toBe('Withdrawal reversed');
    // One more unpaid deposit, this time without a late payment: it expires before the next restart.
    await control(
      sb2.url,
      '/auto',
      { ...(await control(sb2.url, '/auto')).json, lateCompletionRate: 0 },
      'PUT',
    );
    const expired = (await signed(sb2.url, '/v3/deposits', { body: oneShotBody({ expiration: 30 }) })).json
      .deposit_id as number;
    await clock2.advance(31 * MIN);
    expect((await signed(sb2.url, `/v3/deposits/${expired}`)).json.status).toBe('EXPIRED');
    await sb2.close();

    // Another restart: the late completion planned when it expired (3 days later) still comes.
    const clock3 = new ManualClock(t0);
    const sb3 = await start(dir, clock3);
    await clock3.advance(1 * DAY);
    const done = (await control(sb3.url, `/deposits/${unpaid}`)).json;
    expect(done.status).toBe('COMPLETED');
    expect(done.history.map((h: { to: string; trigger: string }) => `${h.to}:${h.trigger}`)).toEqual([
      'PENDING:api',
      'EXPIRED:clock',
      'COMPLETED:late_payment',
    ]);
    // The ground truth follows: the late payment counts in the account's income.
    const brl = sb3.control.balances().find((b) => b.currency === 'BRL');
    expect(brl?.deposits).toBe('100.50');
    // The deposit that expired before this start is cancelled 7 days after it expired.
    await clock3.advance(5 * DAY);
    expect((await signed(sb3.url, `/v3/deposits/${expired}`)).json.status).toBe('EXPIRED');
    await clock3.advance(1 * DAY);
    const cancelled = (await control(sb3.url, `/deposits/${expired}`)).json;
    expect(cancelled.status).toBe('CANCELLED');
    expect(cancelled.history.map((h: { to: string; trigger: string }) => `${h.to}:${h.trigger}`)).toEqual([
      'PENDING:api',
      'EXPIRED:clock',
      'CANCELLED:clock',
    ]);
    await sb3.close();
  });
});
