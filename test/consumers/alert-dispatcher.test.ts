import Fastify, { type FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type AlertSinkConfig, createAlertDispatcher } from '../../src/consumers/alert-dispatcher.ts';
import * as deliveries from '../../src/db/migrations/20261121T1300_alert_deliveries.ts';
import type { AlertRaised } from '../../src/events/payloads.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

function alert(id: string, severity: string, type = 'LATE_REJECTION'): AlertRaised {
  return {
    alertId: id,
    type,
    severity: severity as AlertRaised['severity'],
    account: 'main',
    entityKind: 'cashout',
    entityId: id,
    amount: 12345n,
    currency: 'BRL',
    message: 'COMPLETED payout turned REJECTED',
    raisedAt: new Date('2026-11-21T10:00:00Z'),
    details: { rejection_code: '800' },
  };
}

interface Sink {
  app: FastifyInstance;
  url: string;
  bodies: unknown[];
  failNext: number;
}

async function startSink(): Promise<Sink> {
  const app = Fastify();
  const sink: Sink = { app, url: '', bodies: [], failNext: 0 };
  app.post('/hook', async (req, reply) => {
    if (sink.failNext > 0) {
      sink.failNext -= 1;
      return reply.code(500).send('down');
    }
    sink.bodies.push(req.body);
    return 'ok';
  });
  sink.url = `${await app.listen({ host: '127.0.0.1', port: 0 })}/hook`;
  return sink;
}

const logger = createLogger({ level: 'silent' });

describe('alert dispatcher', () => {
  let tdb: TestDatabase;
  let slack: Sink;
  let hook: Sink;

  beforeAll(async () => {
    tdb = await createTestDatabase();
    const { rows } = await sql<{
      t: string | null;
    }>`SELECT to_regclass('alert_deliveries')::text AS t`.execute(tdb.db);
    if (rows[0]?.t == null) await deliveries.up(tdb.db as never);
    slack = await startSink();
    hook = await startSink();
  });
  afterAll(async () => {
    await slack.app.close();
    await hook.app.close();
    await tdb.drop();
  });
  afterEach(async () => {
    slack.bodies.length = 0;
    hook.bodies.length = 0;
    await tdb.db.deleteFrom('alert_deliveries' as never).execute();
  });

  function sinks(perMinute = 100): AlertSinkConfig[] {
    return [
      { name: 'slack', type: 'slack', url: slack.url, minSeverity: 'high', perMinute },
      { name: 'hook', type: 'webhook', url: hook.url, minSeverity: 'info', perMinute },
    ];
  }

  it('delivers each alert to each sink whose severity filter admits it, with exact amounts', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    const r = await d.dispatch([alert('a1', 'critical'), alert('a2', 'low', 'MISSED_NOTIFICATION')]);
    expect(r.delivered).toBe(3);
    expect(slack.bodies).toEqual([
      { text: '[critical] LATE_REJECTION cashout main/a1: COMPLETED payout turned REJECTED (123.45 BRL)' },
    ]);
    expect(hook.bodies).toHaveLength(2);
    expect(hook.bodies[0]).toMatchObject({
      alert_id: 'a1',
      amount: '123.45',
      currency: 'BRL',
      severity: 'critical',
    });
  });

  it('delivers a replayed alert only once per sink', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    await d.dispatch([alert('b1', 'critical'), alert('b1', 'critical')]);
    await d.dispatch([alert('b1', 'critical')]);
    // A new dispatcher (a restarted process) remembers through the database.
    await createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger }).dispatch([alert('b1', 'critical')]);
    expect(slack.bodies).toHaveLength(1);
    expect(hook.bodies).toHaveLength(1);
  });

  it('folds alerts over the rate limit into one digest, losing none', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(3), logger });
    const batch = Array.from({ length: 10 }, (_, i) => alert(`c${i}`, 'critical'));
    const r = await d.dispatch(batch);
    expect(r.delivered).toBe(20);
    // 3 tokens: two single messages and one digest of the other eight.
    expect(slack.bodies).toHaveLength(3);
    const digest = (slack.bodies[2] as { text: string }).text;
    expect(digest).toMatch(/^8 payrecon alerts:/);
    for (let i = 2; i < 10; i++) expect(digest).toContain(`main/c${i}:`);
    expect(hook.bodies).toHaveLength(3);
    expect((hook.bodies[2] as { alerts: unknown[] }).alerts).toHaveLength(8);
  });

  it('throws a retryable error when a sink fails, and the retry skips the sink already served', async () => {
    const d = createAlertDispatcher({ db: tdb.db, sinks: sinks(), logger });
    slack.failNext = 1;
    await expect(d.dispatch([alert('d1', 'critical')])).rejects.toMatchObject({
      code: 'PUBLISH_FAILED',
      retryable: true,
    });
    expect(hook.bodies).toHaveLength(1);
    await d.dispatch([alert('d1', 'critical')]);
    expect(slack.bodies).toHaveLength(1);
    expect(hook.bodies).toHaveLength(1);
  });

  it('writes alerts to the log sink', async () => {
    const chunks: string[] = [];
    const stream = { write: (s: string) => chunks.push(s) };
    const { pino } = await import('pino');
    const log = pino({ level: 'info' }, stream as never);
    const d = createAlertDispatcher({
      db: tdb.db,
      sinks: [{ name: 'log', type: 'log', minSeverity: 'info' }],
      logger: log,
    });
    await d.dispatch([alert('e1', 'high', 'AMOUNT_MISMATCH')]);
    expect(chunks.join('')).toContain('[high] AMOUNT_MISMATCH cashout main/e1');
  });
});
