import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { listQueue } from '../../src/db/exceptions/queue.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { manualMatch, runMatching, unmatch } from '../../src/db/matching/service.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { DEFAULT_SLA_TABLE } from '../../src/domain/exception-sla.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { parseMinor } from '../../src/domain/money.ts';
import { expectedCashExceptions, openCashExceptions } from './cash-leg-expected.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { DAYS, dateOf, GRACE, NOW, run, sandboxFiles, sha256, shuffled } from './sandbox-cash-files.ts';

const databases: TestDatabase[] = [];
afterAll(async () => {
  for (const t of databases.splice(0)) await t.drop();
});

async function matchesOf(t: TestDatabase) {
  const rows = await t.db
    .selectFrom('matches')
    .innerJoin('match_members', 'match_members.match_id', 'matches.id')
    .select(['matches.id', 'matches.rule', 'match_members.side', 'match_members.identity'])
    .where('matches.ended_at', 'is', null)
    .execute();
  const byId = new Map<string, string[]>();
  for (const r of rows) byId.set(r.id, [...(byId.get(r.id) ?? [r.rule]), `${r.side}:${r.identity}`]);
  return [...byId.values()].map((m) => [m[0], ...m.slice(1).sort()].join(' ')).sort();
}

describe('matching the sandbox files', () => {
  it('raises exactly the planted anomalies, in any order of files, imported twice', async () => {
    const setup = await sandboxFiles();
    const { truth } = setup;
    const lastDay = dateOf(DAYS - 1);
    const { unmatchedLines: expectedLines, notReceived: expectedMissing } = expectedCashExceptions(truth, {
      lastDays: new Map(setup.bankAccounts.map((b) => [b.id, lastDay])),
      now: NOW,
      graceDays: GRACE,
    });
    // The anomalies the rules must match are there, and some to raise.
    const kinds = new Set(truth.bankAnomalies.filter((a) => a.date <= lastDay).map((a) => a.kind));
    for (const kind of [
      'LATE_CREDIT',
      'BATCHED_CREDIT',
      'BANK_FEE',
      'MISSING_CREDIT',
      'RETURNED_CREDIT',
      'UNRELATED_LINE',
    ]) {
      expect(kinds, kind).toContain(kind);
    }
    expect(expectedMissing.length).toBeGreaterThan(0);

    const results: string[][] = [];
    for (const [i, order] of [setup.files, shuffled(setup.files, 36), shuffled(setup.files, 37)].entries()) {
      const t = await createTestDatabase();
      databases.push(t);
      // Each file imported and matched in turn, then every file again.
      for (const file of order) {
        await recordImport(t.db, file);
        await run(t, setup);
      }
      const once = await matchesOf(t);
      for (const file of shuffled(order, 99 + i)) await recordImport(t.db, file);
      const again = await run(t, setup);
      expect(again.bankMatches).toEqual([]);
      expect(await matchesOf(t)).toEqual(once);

      const open = await openCashExceptions(t.db);
      expect(open.unmatchedLines, `order ${i}`).toEqual(expectedLines);
      expect(open.notReceived, `order ${i}`).toEqual(expectedMissing);
      expect(open.others).toEqual([]);
      results.push(once);

      const rules = new Set(once.map((m) => m.split(' ')[0]));
      expect(rules).toContain('bank-reference');
    }
    expect(results[1]).toEqual(results[0]);
    expect(results[2]).toEqual(results[0]);

    // Each match booked its cash leg in its transaction: the bank took exactly the planted fees, the
    // bank account holds what was matched, and the ledger verifies, whatever the order of the files.
    const fees = truth.bankAnomalies
      .filter((a) => a.kind === 'BANK_FEE' && a.date <= lastDay)
      .reduce((total, a) => total + parseMinor(a.amount!), 0n);
    expect(fees).toBeGreaterThan(0n);
    for (const db of databases.slice(0, 3)) {
      const rows = await balances(db.db, { merchantAccount: 'sandbox', book: 'live' });
      const of = (account: string) =>
        rows.filter((r) => r.account === account).reduce((total, r) => total + r.balance, 0n);
      expect(of('bank_fees')).toBe(fees);
      const { rows: credited } = await sql<{ total: string }>`
        SELECT coalesce(sum(b.amount), 0)::text AS total FROM bank_statement_lines b
        JOIN match_members m ON m.side = 'bank_line' AND m.identity = b.identity AND m.live`.execute(db.db);
      expect(of(`bank:${setup.bankAccounts[0]!.id}`)).toBe(parseMinor(credited[0]!.total));
      expect((await verifyLedger(db.db)).failures).toEqual([]);
    }

    // The late, batched and fee-bearing credits are matched, each with its settlements.
    const t = databases[0]!;
    const lines = await t.db.selectFrom('bank_statement_lines').select(['identity', 'reference']).execute();
    const identityOf = new Map(lines.map((l) => [l.reference, l.identity]));
    const settlementRows = await t.db
      .selectFrom('provider_settlement_rows')
      .select(['identity', 'settlement_id'])
      .execute();
    const settlementIdentity = new Map(settlementRows.map((s) => [s.settlement_id, s.identity]));
    const live = await matchesOf(t);
    for (const a of truth.bankAnomalies) {
      if (!['LATE_CREDIT', 'BATCHED_CREDIT', 'BANK_FEE'].includes(a.kind) || a.date > lastDay) continue;
      const identity = identityOf.get(a.bankRef!);
      expect(identity, a.bankRef).toBeDefined();
      const match = live.find((m) => m.includes(`bank_line:${identity}`));
      expect(match, `${a.kind} ${a.bankRef}`).toBeDefined();
      for (const id of a.settlementIds) expect(match).toContain(`settlement:${settlementIdentity.get(id)}`);
    }
  }, 240_000);

  it('matches by hand with a note, unmatches with a note, and the exceptions follow', async () => {
    const t = await createTestDatabase();
    databases.push(t);
    const bytes = new TextEncoder().encode('x');
    await recordImport(t.db, {
      kind: 'bank-statement',
      fileName: 'day.csv',
      sha256: sha256(bytes),
      profile: null,
      importedBy: 'test',
      statements: [
        {
          statementId: null,
          format: 'csv',
          bankAccount: 'DE00',
          currency: 'EUR',
          opening: null,
          closing: null,
          credits: '100.00',
          debits: '0.00',
          booked: 1,
          pending: 0,
          lines: [
            {
              identity: 'line-1',
              content_hash: 'h',
              bank_account: 'DE00',
              currency: 'EUR',
              reference: 'BK1',
              booking_date: '2026-03-05',
              value_date: '2026-03-05',
              amount: '100.00',
              reversal: false,
              end_to_end_ids: [],
              counterparty: null,
              description: 'Payout',
              transactions: [],
            },
          ],
        },
      ],
    });
    await recordImport(t.db, {
      kind: 'provider-settlements',
      fileName: 'settlements.csv',
      sha256: sha256(new TextEncoder().encode('y')),
      profile: null,
      importedBy: 'test',
      rows: [
        {
          identity: 'st-1',
          content_hash: 'h',
          settlement_id: 'S1',
          account: 'm',
          period_start: null,
          period_end: null,
          currency: 'EUR',
          gross: '103.00',
          fees: '0.00',
          settlement_currency: 'EUR',
          rate: '1',
          net: '103.00',
          value_date: '2026-03-01',
          bank_reference: 'REF1',
        },
      ],
    });
    const options = {
      now: new Date('2026-03-10T00:00:00Z'),
      bankAccounts: [{ id: 'DE00', account: 'm', currency: 'EUR' }],
    };
    const first = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(first.bankMatches).toEqual([]);
    expect(first.exceptions.raised).toEqual({ BANK_LINE_UNMATCHED: 1, SETTLEMENT_NOT_RECEIVED: 1 });
    // The queue shows each with its amount: the line's, the settlement's net (they have no payment).
    const queue = await listQueue(t.db, {}, options.now, DEFAULT_SLA_TABLE, 10, null);
    expect(queue.map((q) => [q.type, q.amount, q.currency])).toEqual([
      ['BANK_LINE_UNMATCHED', 10_000n, 'EUR'],
      ['SETTLEMENT_NOT_RECEIVED', 10_300n, 'EUR'],
    ]);
    expect(
      (
        await listQueue(
          t.db,
          { minAmount: 10_100n, currency: 'EUR' },
          options.now,
          DEFAULT_SLA_TABLE,
          10,
          null,
        )
      ).map((q) => q.type),
    ).toEqual(['SETTLEMENT_NOT_RECEIVED']);

    await expect(
      manualMatch(t.db, { pair: 'bank-settlement', left: ['line-1'], right: ['st-1'], by: 'ana', note: ' ' }),
    ).rejects.toThrow(/note/);
    const id = await manualMatch(t.db, {
      pair: 'bank-settlement',
      left: ['line-1'],
      right: ['st-1'],
      by: 'ana',
      note: 'the bank took 3.00 for a foreign transfer',
      bankAccounts: options.bankAccounts,
    });
    // Its cash leg is booked with it: 100.00 in the bank, the 3.00 the bank took in bank fees.
    const ledger = async () => {
      const rows = await balances(t.db, { merchantAccount: 'm', book: 'live' });
      return Object.fromEntries(rows.map((r) => [r.account, r.balance]));
    };
    expect(await ledger()).toMatchObject({
      'bank:DE00': 10_000n,
      bank_fees: 300n,
      settlements_in_transit: 0n,
    });
    const match = await t.db.selectFrom('matches').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(match).toMatchObject({ rule: 'manual', created_by: 'ana', difference: '-3.00' });
    const resolved = await t.db
      .selectFrom('exceptions')
      .select(['type', 'state', 'resolution_note'])
      .execute();
    expect(resolved.map((e) => e.state)).toEqual(['resolved', 'resolved']);
    expect(resolved[0]!.resolution_note).toBe(`matched: match ${id} (manual)`);
    await expect(
      manualMatch(t.db, {
        pair: 'bank-settlement',
        left: ['line-1'],
        right: ['st-1'],
        by: 'bo',
        note: 'again',
      }),
    ).rejects.toThrow(/already matched/);

    // A match is never changed but by its end, nor deleted.
    await expect(
      t.db.updateTable('matches').set({ rule: 'x' }).where('id', '=', id).execute(),
    ).rejects.toThrow(/changes only by being ended/);
    await expect(t.db.deleteFrom('matches').where('id', '=', id).execute()).rejects.toThrow(/never deleted/);

    await unmatch(t.db, { matchId: id, by: 'bo', note: 'wrong settlement' });
    // The unmatch reverses it: the settlement is in transit again.
    expect(await ledger()).toMatchObject({
      'bank:DE00': 0n,
      bank_fees: 0n,
      settlements_in_transit: 10_300n,
    });
    expect((await verifyLedger(t.db)).failures).toEqual([]);
    await expect(unmatch(t.db, { matchId: id, by: 'bo', note: 'twice' })).rejects.toThrow(/no live match/);
    const after = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    // Left to persons: the rules do not take the lines again, and their exceptions open again.
    expect(after.bankMatches).toEqual([]);
    const reopened = await t.db.selectFrom('exceptions').select(['state', 'reopen_reason']).execute();
    expect(reopened.map((e) => e.state)).toEqual(['open', 'open']);
    const ended = await t.db.selectFrom('matches').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(ended).toMatchObject({ ended_by: 'bo', end_note: 'wrong settlement' });
  });
});
