/**
 * Every exception type the ledger raises carries its facts, as an operator reads them
 * in the exception workbook and in the alert: entity, invoice or external id, intent amount and currency,
 * provider amount and currency (where the provider reports one), provider status and reason (a cashout's
 * rejection code), and the rule in one sentence; no alert without an amount where one is known; the
 * provider's own status reasons are their own types and never an intent-versus-provider mismatch when
 * the amounts agree (the 1579.54 both sides); the refused reading of an ILLEGAL_TRANSITION or
 * FACTS_CHANGED is in the workbook.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listQueue } from '../../src/db/exceptions/queue.ts';
import type { ExceptionFacts } from '../../src/db/exceptions/raise.ts';
import { sweepExceptions } from '../../src/db/exceptions/sweep.ts';
import { applyObservations, recordIntents } from '../../src/db/ledger/service.ts';
import type { OutboxPayload } from '../../src/db/runs/outbox.ts';
import { withLedgerTransaction } from '../../src/db/transaction.ts';
import { EXCEPTION_RULE_TEXT, type ExceptionType } from '../../src/domain/exception-rules.ts';
import { DEFAULT_SLA_TABLE } from '../../src/domain/exception-sla.ts';
import { formatAmount } from '../../src/domain/money.ts';
import type { Intent, Observation } from '../../src/domain/observation.ts';
import { addDays, localDate } from '../../src/domain/zoned-time.ts';
import { alertFromOutbox } from '../../src/producers/outbox-relay.ts';
import { writeExceptionWorkbook } from '../../src/reports/exception-workbook.ts';
import { periodOf } from '../../src/reports/period.ts';
import { intent, obs } from '../db/fixtures.ts';
import { createTestDatabase, type TestDatabase } from '../db/helpers.ts';

let t: TestDatabase;
let dir: string;

const apply = (o: Observation[]) => withLedgerTransaction(t.db, (trx) => applyObservations(trx, o));
const intents = (i: Intent[]) => withLedgerTransaction(t.db, (trx) => recordIntents(trx, i));

type Row = {
  id: string;
  type: ExceptionType;
  entity_kind: string;
  entity_id: string;
  details: { facts?: ExceptionFacts } & Record<string, unknown>;
};

/** The exceptions of one entity, by type. */
async function exceptionsOf(entityId: string): Promise<Map<string, Row>> {
  const rows = (await t.db
    .selectFrom('exceptions')
    .select(['id', 'type', 'entity_kind', 'entity_id', 'details'])
    .where('entity_id', '=', entityId)
    .execute()) as unknown as Row[];
  return new Map(rows.map((r) => [r.type, r]));
}

beforeAll(async () => {
  t = await createTestDatabase();
  dir = await mkdtemp(join(tmpdir(), 'payrecon-facts-'));
  await intents([
    intent('deposit', 'f-am', 10_000n),
    intent('deposit', 'f-cm', 10_000n),
    intent('deposit', 'f-tp', 10_000n),
    intent('deposit', 'f-pam', 157_954n),
    intent('deposit', 'f-pu', 10_000n),
    intent('deposit', 'f-miss', 10_000n),
    intent('deposit', 'f-il', 10_000n),
    intent('cashout', 'f-lr', 5_000n),
    intent('deposit', 'f-lc', 10_000n),
    intent('deposit', 'f-tplc', 10_000n),
    intent('deposit', 'f-er', 10_000n),
    intent('deposit', 'f-fc', 10_000n),
    intent('deposit', 'f-or', 10_000n),
    intent('deposit', 'f-fee', 10_000n, { expectedFee: 100n }),
    intent('deposit', 'f-dup1', 10_000n, { externalRef: 'inv-dup' }),
    intent('deposit', 'f-dup2', 10_000n, { externalRef: 'inv-dup' }),
    intent('cashout', 'f-stuck', 7_000n),
  ]);
  await apply([
    obs('deposit', 'f-am', 'PENDING', 1, { amount: 9_000n }),
    obs('deposit', 'f-cm', 'PENDING', 1, { currency: 'MXN' }),
    obs('deposit', 'f-tp', 'PENDING', 1),
    obs('deposit', 'f-pam', 'PENDING', 1, { amount: 157_954n }),
    obs('deposit', 'f-pu', 'COMPLETED', 1, { payerVerification: 'UNMATCH' }),
    obs('deposit', 'f-miss', null, 1, { currency: null, amount: null }),
    obs('deposit', 'f-il', 'COMPLETED', 1),
    obs('cashout', 'f-lr', 'COMPLETED', 1),
    obs('deposit', 'f-lc', 'EXPIRED', 1),
    obs('deposit', 'f-tplc', 'CANCELLED', 1, { statusReason: 'THIRD_PARTY_PAYER' }),
    obs('deposit', 'f-er', 'EARLY_RELEASED', 1),
    obs('deposit', 'f-fc', 'COMPLETED', 1),
    obs('deposit', 'f-or', 'COMPLETED', 1),
    obs('deposit', 'f-fee', 'COMPLETED', 1, { feeAmount: 300n, feeCurrency: 'BRL', feeOnPayer: false }),
    obs('deposit', 'f-dup1', 'PENDING', 1, { externalRef: 'inv-dup' }),
    obs('cashout', 'f-stuck', 'ON_HOLD', 1),
    // No intent names it: UNKNOWN_TRANSACTION after the grace.
    obs('deposit', 'f-unk', 'PENDING', 1, { source: 'webhook' }),
  ]);
  await apply([
    obs('deposit', 'f-tp', 'CANCELLED', 2, { statusReason: 'THIRD_PARTY_PAYER' }),
    // The provider's AMOUNT_MISMATCH reason while both sides say 1579.54.
    obs('deposit', 'f-pam', 'CANCELLED', 2, { amount: 157_954n, statusReason: 'AMOUNT_MISMATCH' }),
    obs('deposit', 'f-il', 'PENDING', 2),
    obs('cashout', 'f-lr', 'REJECTED', 2, { rejectionCode: '826', rejectionReason: 'Withdrawal reversed' }),
    obs('deposit', 'f-lc', 'COMPLETED', 2),
    // Cancelled for a third-party payer, then completed by hand: the reason went with the CANCELLED.
    obs('deposit', 'f-tplc', 'COMPLETED', 2),
    obs('deposit', 'f-er', 'CANCELLED', 2),
    obs('deposit', 'f-fc', 'COMPLETED', 2, { currency: 'MXN', amount: 25_000n }),
    obs('refund', 'f-or-r1', 'PENDING', 2, { parentDepositId: 'f-or', amount: 6_000n }),
    obs('refund', 'f-or-r2', 'PENDING', 2, { parentDepositId: 'f-or', amount: 6_000n }),
    obs('deposit', 'f-dup2', 'PENDING', 2, { externalRef: 'inv-dup' }),
  ]);
  // A poll-only change for MISSED_NOTIFICATION; then the sweep past every grace and deadline.
  await apply([
    obs('deposit', 'f-am', 'PENDING', 3, { amount: 9_000n, source: 'webhook' }),
    obs('deposit', 'f-fee', 'COMPLETED', 3, { feeAmount: 300n, feeCurrency: 'BRL', feeOnPayer: false }),
  ]);
  await sweepExceptions(t.db, new Date(Date.now() + 3_600_000));
});

afterAll(async () => {
  await t?.drop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The raised type of each entity, and what its facts must say. */
const CASES: {
  type: ExceptionType;
  entity: string;
  kind?: string;
  intent: [string, string] | null;
  provider: [string, string] | null;
  status: string | null;
  reason?: string;
  refused?: string;
}[] = [
  {
    type: 'AMOUNT_MISMATCH',
    entity: 'f-am',
    intent: ['100.00', 'BRL'],
    provider: ['90.00', 'BRL'],
    status: 'PENDING',
  },
  {
    type: 'CURRENCY_MISMATCH',
    entity: 'f-cm',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'MXN'],
    status: 'PENDING',
  },
  {
    type: 'THIRD_PARTY_PAYER',
    entity: 'f-tp',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'CANCELLED',
    reason: 'THIRD_PARTY_PAYER',
  },
  {
    type: 'PROVIDER_AMOUNT_MISMATCH',
    entity: 'f-pam',
    intent: ['1579.54', 'BRL'],
    provider: ['1579.54', 'BRL'],
    status: 'CANCELLED',
    reason: 'AMOUNT_MISMATCH',
  },
  {
    type: 'PAYER_UNMATCH',
    entity: 'f-pu',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
  },
  // "Not found": the provider reports no amount, the intent's stands.
  { type: 'MISSING_AT_PROVIDER', entity: 'f-miss', intent: ['100.00', 'BRL'], provider: null, status: null },
  {
    type: 'ILLEGAL_TRANSITION',
    entity: 'f-il',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
    refused: 'COMPLETED → PENDING (not applied)',
  },
  // A cashout's status answer carries no amount: the intent's is the one known.
  {
    type: 'LATE_REJECTION',
    entity: 'f-lr',
    kind: 'cashout',
    intent: ['50.00', 'BRL'],
    provider: null,
    status: 'REJECTED',
    reason: '826 Withdrawal reversed',
  },
  {
    type: 'LATE_COMPLETION',
    entity: 'f-lc',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
  },
  // Its status reason went with the CANCELLED: the completed deposit shows none.
  {
    type: 'LATE_COMPLETION',
    entity: 'f-tplc',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
  },
  {
    type: 'THIRD_PARTY_PAYER',
    entity: 'f-tplc',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'CANCELLED',
    reason: 'THIRD_PARTY_PAYER',
  },
  {
    type: 'EARLY_RELEASE_REVERSED',
    entity: 'f-er',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'CANCELLED',
  },
  {
    type: 'FACTS_CHANGED',
    entity: 'f-fc',
    intent: ['100.00', 'BRL'],
    provider: ['250.00', 'MXN'],
    status: 'COMPLETED',
    refused: 'currency BRL → MXN; amount 100.00 → 250.00',
  },
  {
    type: 'OVER_REFUNDED',
    entity: 'f-or',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
  },
  {
    type: 'FEE_MISMATCH',
    entity: 'f-fee',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'COMPLETED',
  },
  {
    type: 'DUPLICATE_INVOICE',
    entity: 'f-dup2',
    intent: ['100.00', 'BRL'],
    provider: ['100.00', 'BRL'],
    status: 'PENDING',
  },
  {
    type: 'STUCK',
    entity: 'f-stuck',
    kind: 'cashout',
    intent: ['70.00', 'BRL'],
    provider: null,
    status: 'ON_HOLD',
  },
  {
    type: 'UNKNOWN_TRANSACTION',
    entity: 'f-unk',
    intent: null,
    provider: ['100.00', 'BRL'],
    status: 'PENDING',
  },
];

describe('the facts every exception carries', () => {
  it('in the exception row: ids, intent and provider amounts, status and reason, the rule', async () => {
    for (const c of CASES) {
      const row = (await exceptionsOf(c.entity)).get(c.type);
      expect(row, `${c.type} of ${c.entity}`).toBeDefined();
      const f = row!.details.facts!;
      expect(f, c.type).toMatchObject({
        entity: `${c.kind ?? 'deposit'}:${c.entity}`,
        externalRef: c.entity === 'f-dup2' ? 'inv-dup' : `ref-${c.entity}`,
        intentAmount: c.intent?.[0] ?? null,
        intentCurrency: c.intent?.[1] ?? null,
        providerAmount: c.provider?.[0] ?? null,
        providerCurrency: c.provider?.[1] ?? null,
        status: c.status,
        rule: EXCEPTION_RULE_TEXT[c.type],
      });
      const reason = [f.statusReason, f.rejectionCode, f.rejectionReason].filter(Boolean).join(' ');
      expect(reason || undefined, c.type).toBe(c.reason);
    }
  });

  it("in the queue the page and the API list: the payment's amount and currency where one is known", async () => {
    const rows = await listQueue(
      t.db,
      {},
      new Date(Date.now() + 2 * 3_600_000),
      DEFAULT_SLA_TABLE,
      500,
      null,
    );
    for (const c of CASES) {
      const row = rows.find((r) => r.type === c.type && r.entityId === c.entity);
      expect(row, `${c.type} of ${c.entity}`).toBeDefined();
      // The ledger's amount: the provider's (frozen on the first for FACTS_CHANGED), else the intent's.
      const known = c.type === 'FACTS_CHANGED' ? c.intent : (c.provider ?? c.intent);
      expect([row!.amount === null ? null : formatAmount(row!.amount), row!.currency], c.type).toEqual([
        known?.[0] ?? null,
        known?.[1] ?? null,
      ]);
    }
  });

  it('raises no intent-versus-provider mismatch where the two agree', async () => {
    for (const entity of ['f-tp', 'f-pam', 'f-il', 'f-lc', 'f-er', 'f-or', 'f-unk']) {
      const types = [...(await exceptionsOf(entity)).keys()];
      expect(types, entity).not.toContain('AMOUNT_MISMATCH');
      expect(types, entity).not.toContain('CURRENCY_MISMATCH');
    }
  });

  it('in every alert: an amount and currency where one is known, the rule as its message, the facts', async () => {
    const rows = await t.db.selectFrom('outbox').select(['alert_id', 'payload']).execute();
    const alerted = new Set<string>();
    for (const r of rows) {
      const alert = alertFromOutbox(r.payload as unknown as OutboxPayload);
      const c = CASES.find((x) => x.type === alert.type && x.entity === alert.entityId);
      if (!c) continue;
      alerted.add(c.type);
      const known = c.provider ?? c.intent;
      expect(alert.amount === null ? null : formatAmount(alert.amount), r.alert_id).toBe(known?.[0] ?? null);
      expect(alert.currency, r.alert_id).toBe(known?.[1] ?? null);
      expect(alert.message).toBe(EXCEPTION_RULE_TEXT[c.type]);
      expect((alert.details as { facts?: ExceptionFacts }).facts?.entity).toBe(
        `${c.kind ?? 'deposit'}:${c.entity}`,
      );
    }
    // Every type at or above the default alert severity (high) alerted.
    expect([...alerted].sort()).toEqual(
      [
        'AMOUNT_MISMATCH',
        'CURRENCY_MISMATCH',
        'PROVIDER_AMOUNT_MISMATCH',
        'MISSING_AT_PROVIDER',
        'LATE_REJECTION',
        'LATE_COMPLETION',
        'EARLY_RELEASE_REVERSED',
        'FACTS_CHANGED',
        'OVER_REFUNDED',
        'UNKNOWN_TRANSACTION',
      ].sort(),
    );
  });

  it('in the exception workbook: one row each with the same facts and the refused reading', async () => {
    const today = localDate(new Date(), 'UTC');
    const out = join(dir, 'exceptions.xlsx');
    await writeExceptionWorkbook(t.db, {
      period: periodOf(addDays(today, -1), addDays(today, 1), 'UTC'),
      account: null,
      out,
      now: new Date(Date.now() + 2 * 3_600_000),
    });
    const wb = new ExcelJS.Workbook();
    await wb.xlsx.readFile(out);
    const sheet = wb.getWorksheet('Exceptions')!;
    const headers = (sheet.getRow(2).values as unknown[]).map((v) => String(v ?? ''));
    const cell = (row: ExcelJS.Row, header: string) => {
      const i = headers.indexOf(header);
      if (i < 1) throw new Error(`no column ${header} in ${headers.join('|')}`);
      const v = row.getCell(i).value;
      return v === null || v === undefined ? null : v;
    };
    const rows: ExcelJS.Row[] = [];
    sheet.eachRow((row, n) => {
      if (n > 2) rows.push(row);
    });
    for (const c of CASES) {
      const row = rows.find((r) => cell(r, 'Type') === c.type && cell(r, 'Entity id') === c.entity);
      expect(row, `${c.type} of ${c.entity}`).toBeDefined();
      const money = (v: unknown) => (v === null ? null : Number(v).toFixed(2));
      expect(
        [
          cell(row!, 'Invoice / external id'),
          money(cell(row!, 'Intent amount')),
          cell(row!, 'Intent currency'),
          money(cell(row!, 'Provider amount')),
          cell(row!, 'Provider currency'),
          cell(row!, 'Provider status'),
          cell(row!, 'Status reason'),
          cell(row!, 'Rule'),
          cell(row!, 'Provider said (not applied)'),
        ],
        c.type,
      ).toEqual([
        c.entity === 'f-dup2' ? 'inv-dup' : `ref-${c.entity}`,
        c.intent?.[0] ?? null,
        c.intent?.[1] ?? null,
        c.provider?.[0] ?? null,
        c.provider?.[1] ?? null,
        c.status,
        c.reason ?? null,
        EXCEPTION_RULE_TEXT[c.type],
        c.refused ?? null,
      ]);
    }
  });
});
