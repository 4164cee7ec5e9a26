import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { recordImport } from '../../src/db/imports/service.ts';
import { verifyLedger } from '../../src/db/ledger/verify.ts';
import { matchByHand, unmatchByHand } from '../../src/db/matching/by-hand.ts';
import { manualMatch, runMatching, unmatch } from '../../src/db/matching/service.ts';
import { balances } from '../../src/db/read-models/balances.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { parseMinor } from '../../src/domain/money.ts';
import {
  cashCell,
  expectedCashLeg,
  expectedNotReceived,
  expectedUnmatchedLines,
  plantedBankFees,
} from '../sandbox/planted-cash.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { DAYS, dateOf, GRACE, NOW, run, sandboxFiles, sha256, shuffled } from './sandbox-cash-files.ts';

const databases: TestDatabase[] = [];
afterAll(async () => {
  for (const t of databases.splice(0)) await t.drop();
});

async function openExceptions(t: TestDatabase) {
  const rows = await t.db
    .selectFrom('exceptions')
    .select(['type', 'entity_id', 'details'])
    .where('state', '<>', 'resolved')
    .execute();
  return {
    unmatchedLines: rows
      .filter((r) => r.type === 'BANK_LINE_UNMATCHED')
      .map((r) => String((r.details as { reference: string }).reference))
      .sort(),
    notReceived: rows
      .filter((r) => r.type === 'SETTLEMENT_NOT_RECEIVED')
      .map((r) => r.entity_id)
      .sort(),
    others: rows.filter((r) => r.type !== 'BANK_LINE_UNMATCHED' && r.type !== 'SETTLEMENT_NOT_RECEIVED'),
  };
}

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

/**
 * A database with one bank line of 100.00 and one settlement of 103.00 that the rules do not match (the
 * bank took 3.00), and the matching options of its bank account.
 */
async function lineAndSettlement() {
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
  return { t, options };
}

describe('matching the sandbox files', () => {
  it('raises exactly the planted anomalies, in any order of files, imported twice', async () => {
    const setup = await sandboxFiles();
    const { cash } = setup;
    const lastDay = dateOf(DAYS - 1);
    const today = NOW.toISOString().slice(0, 10);
    const expectedLines = expectedUnmatchedLines(cash, lastDay, new Set(setup.bankAccounts.map((b) => b.id)));
    const expectedMissing = expectedNotReceived(cash, { lastDay, today, graceDays: GRACE });
    // The anomalies the rules must match are there, and some to raise.
    const kinds = new Set(cash.anomalies.filter((a) => a.date <= lastDay).map((a) => a.kind));
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

      const open = await openExceptions(t);
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
    const fees = plantedBankFees(cash, lastDay);
    expect(fees).toBeGreaterThan(0n);
    // The whole cash leg as the sandbox's records give it (nothing but settlements moved `available`).
    const cashLeg = expectedCashLeg(cash, { lastDay, reported: () => true });
    for (const db of databases.slice(0, 3)) {
      const rows = await balances(db.db, { merchantAccount: 'sandbox', book: 'live' });
      const held = new Map<string, bigint>();
      for (const r of rows) {
        const k = cashCell(r.merchantAccount, r.currency, r.account);
        held.set(k, (held.get(k) ?? 0n) + r.balance);
      }
      const nonZero = (m: Map<string, bigint>) =>
        Object.fromEntries([...m].filter(([, v]) => v !== 0n).sort());
      expect(nonZero(held)).toEqual(nonZero(cashLeg));
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
    for (const a of cash.anomalies) {
      if (!['LATE_CREDIT', 'BATCHED_CREDIT', 'BANK_FEE'].includes(a.kind) || a.date > lastDay) continue;
      const identity = identityOf.get(a.bankRef!);
      expect(identity, a.bankRef).toBeDefined();
      const match = live.find((m) => m.includes(`bank_line:${identity}`));
      expect(match, `${a.kind} ${a.bankRef}`).toBeDefined();
      for (const id of a.settlementIds) expect(match).toContain(`settlement:${settlementIdentity.get(id)}`);
    }
  }, 240_000);

  it('matches by hand with a note, unmatches with a note, and the exceptions follow', async () => {
    const { t, options } = await lineAndSettlement();
    const first = await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    expect(first.bankMatches).toEqual([]);
    expect(first.exceptions.raised).toEqual({ BANK_LINE_UNMATCHED: 1, SETTLEMENT_NOT_RECEIVED: 1 });

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
  it('matches and unmatches by hand in one transaction: a failure after the match leaves nothing', async () => {
    const { t, options } = await lineAndSettlement();
    await runMatching(t.db, DEFAULT_MATCH_RULES, options);
    // What a match by hand writes: the match and its members, its cash leg, the exceptions it resolves and
    // their trail.
    const state = async () => ({
      matches: await t.db.selectFrom('matches').select(['id', 'ended_at', 'ended_by', 'end_note']).execute(),
      members: await t.db.selectFrom('match_members').selectAll().orderBy('identity').execute(),
      entries: await t.db.selectFrom('journal_entries').select(['idempotency_key']).orderBy('id').execute(),
      balances: await balances(t.db, { merchantAccount: 'm', book: 'live' }),
      exceptions: await t.db
        .selectFrom('exceptions')
        .select(['id', 'state', 'resolution_note'])
        .orderBy('id')
        .execute(),
      trail: await t.db
        .selectFrom('exception_events')
        .select(['id', 'action', 'note'])
        .orderBy('id')
        .execute(),
    });
    // A real constraint of this database refuses the person's comment on the exceptions' trail: the last
    // thing a match by hand writes.
    await sql`ALTER TABLE exception_events ADD CONSTRAINT test_refused_comment_ck
      CHECK (action <> 'comment' OR note NOT LIKE '%refused here%')`.execute(t.db);
    const by = { pair: 'bank-settlement' as const, left: ['line-1'], right: ['st-1'], by: 'ana' };
    const before = await state();
    expect(before.exceptions.map((e) => e.state)).toEqual(['open', 'open']);
    await expect(
      matchByHand(t.db, { ...by, note: 'refused here', bankAccounts: options.bankAccounts }),
    ).rejects.toThrow(/test_refused_comment_ck/);
    expect(await state()).toEqual(before);

    const id = await matchByHand(t.db, {
      ...by,
      note: 'the bank took 3.00',
      bankAccounts: options.bankAccounts,
    });
    const matched = await state();
    expect(matched.exceptions.map((e) => e.state)).toEqual(['resolved', 'resolved']);
    expect(matched.trail.filter((e) => e.action === 'comment').map((e) => e.note)).toEqual([
      `matched by hand (match ${id}): the bank took 3.00`,
      `matched by hand (match ${id}): the bank took 3.00`,
    ]);
    expect(matched.balances.find((b) => b.account === 'bank:DE00')?.balance).toBe(10_000n);

    await expect(unmatchByHand(t.db, { matchId: id, by: 'bo', note: 'refused here' })).rejects.toThrow(
      /test_refused_comment_ck/,
    );
    // The match stands, booked as it was: no end, no reversal of its cash leg.
    expect(await state()).toEqual(matched);
    await unmatchByHand(t.db, { matchId: id, by: 'bo', note: 'wrong settlement' });
    const ended = await state();
    expect(ended.matches).toMatchObject([{ id, ended_by: 'bo', end_note: 'wrong settlement' }]);
    expect(ended.balances.find((b) => b.account === 'bank:DE00')?.balance).toBe(0n);
    expect((await verifyLedger(t.db)).failures).toEqual([]);
  });
});
