/**
 * The month close on the real database: figures of September 2026 (opening from the
 * daily snapshots, movements by effect, closing, the proof, a cashout in flight at the cut-off, an
 * exception open at it), signing (canonical text and its SHA-256, checked by the database too), the
 * freeze (no update of figures, no delete), the refused self-approval (the service's 403 and the
 * database's CHECK), approval by someone else, and a post-close adjustment: an entry booked in October
 * with an effect date in September shows on both periods and leaves September's signed figures as they were.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CloseScope, closeDocument, postCloseAdjustments } from '../../src/db/closes/document.ts';
import { getCloseRecord } from '../../src/db/closes/records.ts';
import { closeLedgers } from '../../src/db/closes/scopes.ts';
import { approveClose, prepareClose } from '../../src/db/closes/service.ts';
import { takeBalanceSnapshots } from '../../src/db/ledger/balance-snapshots.ts';
import { canonicalJson, sha256Hex } from '../../src/domain/close.ts';
import { monthOfInstant, monthPeriod, periodOf } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { bookEntry, closeLedger } from './close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
beforeAll(async () => {
  t = await createTestDatabase();
});
afterAll(async () => {
  await t?.drop();
});

const TZ = 'America/Sao_Paulo';
const scope = (period: string, currency = 'BRL'): CloseScope => {
  const p = monthPeriod(period, TZ);
  return {
    merchantAccount: 'acme',
    currency,
    period,
    timeZone: TZ,
    start: p.start,
    end: p.end,
    monthOf: (d) => monthOfInstant(d, TZ),
  };
};

type Booking = Parameters<typeof bookEntry> extends [unknown, ...infer R] ? R : never;
const entry = (...args: Booking) => bookEntry(t.db, ...args);

describe('month close', () => {
  it('computes, signs, freezes and approves a month with its in-flight cashout and open exception', async () => {
    await closeLedger(t.db);
    // August: history before the period (read through the snapshots).
    await entry(
      'deposit',
      'd1',
      'credit',
      [
        ['available', '1000.00'],
        ['deposits', '-1000.00'],
      ],
      '2026-08-10T12:00Z',
    );
    // September (Sao Paulo time: from 03:00Z on the 1st to 03:00Z on 1 October).
    await entry(
      'deposit',
      'd2',
      'credit',
      [
        ['available', '250.50'],
        ['deposits', '-250.50'],
      ],
      '2026-09-01T02:00Z',
    ); // still August locally
    await entry(
      'deposit',
      'd3',
      'credit',
      [
        ['available', '400.00'],
        ['deposits', '-400.00'],
      ],
      '2026-09-05T10:00Z',
    );
    await entry(
      'deposit',
      'd3',
      'fee',
      [
        ['fees', '4.00'],
        ['available', '-4.00'],
      ],
      '2026-09-05T10:00Z',
    );
    await entry(
      'cashout',
      'c1',
      'reserve',
      [
        ['reserved', '300.00'],
        ['available', '-300.00'],
      ],
      '2026-09-20T10:00Z',
    );
    await entry(
      'cashout',
      'c2',
      'reserve',
      [
        ['reserved', '50.00'],
        ['available', '-50.00'],
      ],
      '2026-09-21T10:00Z',
    );
    await entry(
      'cashout',
      'c2',
      'settle',
      [
        ['payouts', '50.00'],
        ['reserved', '-50.00'],
      ],
      '2026-09-22T10:00Z',
    );
    // October: c1 settles after the cut-off, so it was in flight at it.
    await entry(
      'cashout',
      'c1',
      'settle',
      [
        ['payouts', '300.00'],
        ['reserved', '-300.00'],
      ],
      '2026-10-02T10:00Z',
    );
    await sql`INSERT INTO mirrors (merchant_account, entity_kind, entity_id, status, currency, amount)
      VALUES ('acme', 'cashout', 'c1', 'COMPLETED', 'BRL', 300.00), ('acme', 'deposit', 'd3', 'COMPLETED', 'BRL', 400.00)`.execute(
      t.db,
    );
    // An exception open at the cut-off (resolved in October) and one resolved before it.
    await sql`INSERT INTO exceptions (type, merchant_account, entity_kind, entity_id, severity, state, first_seen_at,
        last_seen_at, details, resolved_at, resolved_by)
      VALUES ('AMOUNT_MISMATCH', 'acme', 'deposit', 'd3', 'high', 'resolved', '2026-09-06T10:00Z', '2026-09-06T10:00Z', '{}',
        '2026-10-03T10:00Z', 'ana'),
       ('STUCK', 'acme', 'cashout', 'c1', 'medium', 'resolved', '2026-09-02T10:00Z', '2026-09-02T10:00Z', '{}',
        '2026-09-03T10:00Z', 'ana')`.execute(t.db);
    expect(await takeBalanceSnapshots(t.db)).toBeGreaterThan(0);

    const doc = await closeDocument(t.db, scope('2026-09'));
    const line = (account: string) => doc.accounts.find((a) => a.account === account);
    expect(line('available')).toEqual({
      book: 'live',
      account: 'available',
      opening: '1250.50',
      movements: '46.00',
      closing: '1296.50',
      proof: '0.00',
    });
    expect(line('reserved')).toMatchObject({ opening: '0.00', movements: '300.00', closing: '300.00' });
    expect(doc.proof).toBe('0.00');
    expect(
      doc.movements.filter((m) => m.account === 'available').map((m) => [m.entityKind, m.effect, m.amount]),
    ).toEqual([
      ['cashout', 'reserve', '-350.00'],
      ['deposit', 'credit', '400.00'],
      ['deposit', 'fee', '-4.00'],
    ]);
    expect(doc.inFlight.map((f) => [f.kind, f.entityId, f.amount])).toEqual([['cashout', 'c1', '300.00']]);
    expect(doc.inFlightTotal).toBe(doc.reservedAtEnd);
    expect(doc.exceptions.map((x) => [x.type, x.entityId, x.amount])).toEqual([
      ['AMOUNT_MISMATCH', 'd3', '400.00'],
    ]);
    expect(doc.exceptionsTotal).toBe('400.00');

    // Not over yet: refused. Signed: canonical text, its hash, verified.
    await expect(
      prepareClose(t.db, scope('2026-09'), 'ana', new Date('2026-09-30T12:00Z')),
    ).rejects.toMatchObject({
      code: 'CONFLICT',
    });
    const signed = await prepareClose(t.db, scope('2026-09'), 'ana', new Date('2026-10-05T12:00Z'));
    expect(signed.status).toBe('prepared');
    expect(signed.canonical).toBe(canonicalJson(doc));
    expect(signed.sha256).toBe(sha256Hex(signed.canonical));
    expect(signed.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(signed.verified).toBe(true);
    expect(signed.document).toEqual(doc);
    await expect(prepareClose(t.db, scope('2026-09'), 'bob', new Date())).rejects.toMatchObject({
      code: 'CONFLICT',
    });

    // Frozen: figures cannot change, the row cannot go, a hash that does not match cannot be stored.
    await expect(
      sql`UPDATE closes SET figures = '{"v":1}'::jsonb, canonical = '{"v":1}' WHERE period = '2026-09'`.execute(
        t.db,
      ),
    ).rejects.toThrow(/frozen/);
    await expect(sql`DELETE FROM closes WHERE period = '2026-09'`.execute(t.db)).rejects.toThrow(
      /cannot be deleted/,
    );
    await expect(
      sql`INSERT INTO closes (merchant_account, currency, period, prepared_by, figures, canonical, sha256, period_start,
          period_end, time_zone)
        VALUES ('acme', 'USD', '2026-09', 'ana', '{"v":1}', '{"v":1}', ${'0'.repeat(64)}, now(), now() + interval '1 day', 'UTC')`.execute(
        t.db,
      ),
    ).rejects.toThrow(/closes_sha256_ck/);

    // The preparer cannot approve: the service says so (403), and the database refuses it anyway.
    await expect(
      approveClose(t.db, { merchantAccount: 'acme', currency: 'BRL', period: '2026-09' }, 'ana', new Date()),
    ).rejects.toMatchObject({ code: 'FORBIDDEN', message: expect.stringMatching(/different controller/) });
    await expect(
      sql`UPDATE closes SET status = 'approved', approved_by = prepared_by, approved_at = now() WHERE period = '2026-09'`.execute(
        t.db,
      ),
    ).rejects.toThrow(/closes_approver_ck/);
    const approved = await approveClose(
      t.db,
      { merchantAccount: 'acme', currency: 'BRL', period: '2026-09' },
      'bob',
      new Date('2026-10-06T09:00Z'),
    );
    expect(approved).toMatchObject({
      status: 'approved',
      approvedBy: 'bob',
      preparedBy: 'ana',
      verified: true,
    });
    expect(approved.sha256).toBe(signed.sha256);
    await expect(
      approveClose(
        t.db,
        { merchantAccount: 'acme', currency: 'BRL', period: '2026-09' },
        'carol',
        new Date(),
      ),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(
      sql`UPDATE closes SET approved_by = 'carol' WHERE period = '2026-09'`.execute(t.db),
    ).rejects.toThrow(/frozen/);
  });

  it('carries the sign-off on the summary of the settlement workbook of the month, and none on other periods', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-close-wb-'));
    try {
      const sheetText = async (from: string, to: string) => {
        const out = join(dir, `${from}.xlsx`);
        await writeSettlementWorkbook(t.db, { period: periodOf(from, to, TZ), account: 'acme', out });
        const wb = new ExcelJS.Workbook();
        await wb.xlsx.readFile(out);
        const lines: string[] = [];
        wb.getWorksheet('Summary BRL')?.eachRow((row) => {
          lines.push(String(row.getCell(1).value ?? ''));
        });
        return lines;
      };
      const close = await getCloseRecord(t.db, 'acme', 'BRL', '2026-09');
      const month = await sheetText('2026-09-01', '2026-09-30');
      const at = month.findIndex((l) => l.startsWith('Month close 2026-09 · acme'));
      expect(month[at]).toMatch(
        /^Month close 2026-09 · acme: prepared and signed by ana, 5 Oct 2026, \d\d:\d\d$/,
      );
      expect(month[at + 1]).toMatch(/^ {2}approved by bob, 6 Oct 2026, 06:00$/);
      expect(month[at + 2]).toBe(`  SHA-256 ${close?.sha256}`);
      // October is not signed; a part of September is not a month.
      expect(await sheetText('2026-10-01', '2026-10-31')).toContain('Month close 2026-10: not signed yet');
      expect((await sheetText('2026-09-01', '2026-09-15')).some((l) => l.startsWith('Month close'))).toBe(
        false,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('shows a post-close adjustment on the closed period and the next, and the frozen figures stay', async () => {
    const before = await getCloseRecord(t.db, 'acme', 'BRL', '2026-09');
    // A late fee on d3, booked on 10 October with the effect date of 5 September.
    await entry(
      'deposit',
      'd3',
      'fee',
      [
        ['fees', '1.50'],
        ['available', '-1.50'],
      ],
      '2026-10-10T10:00Z',
      'BRL',
      '2026-09-05T10:00Z',
    );
    // Booked by hand in the past: the days' snapshots after it are taken again, as they would be later.
    await sql`DELETE FROM ledger_balance_snapshots WHERE at > '2026-10-10T10:00Z'`.execute(t.db);
    await takeBalanceSnapshots(t.db);
    const after = await getCloseRecord(t.db, 'acme', 'BRL', '2026-09');
    expect(after?.canonical).toBe(before?.canonical);
    expect(after?.sha256).toBe(before?.sha256);
    expect(after?.verified).toBe(true);

    const late = await postCloseAdjustments(t.db, scope('2026-09'));
    expect(late.map((a) => [a.entityId, a.effect, a.available, a.effectPeriod])).toEqual([
      ['d3', 'fee', '-1.50', '2026-09'],
    ]);
    const october = await closeDocument(t.db, scope('2026-10'));
    expect(october.earlierPeriodAdjustments.map((a) => [a.entityId, a.available, a.effectPeriod])).toEqual([
      ['d3', '-1.50', '2026-09'],
    ]);
    // October opens where September closed and carries the adjustment in its movements.
    expect(october.accounts.find((a) => a.account === 'available')).toMatchObject({
      opening: '1296.50',
      movements: '-1.50',
      closing: '1295.00',
      proof: '0.00',
    });
    // September computed again is what was signed: booking time keeps a closed period's figures.
    expect(canonicalJson(await closeDocument(t.db, scope('2026-09')))).toBe(before?.canonical);
  });

  it('refuses to sign a period whose proof is not zero', async () => {
    // USD has an entry in August, so September has figures to sign.
    await entry(
      'deposit',
      'u1',
      'credit',
      [
        ['available', '5.00'],
        ['deposits', '-5.00'],
      ],
      '2026-08-20T10:00Z',
      'USD',
    );
    // A snapshot written by hand on 15 September that disagrees with the postings before it.
    await sql`INSERT INTO ledger_balance_snapshots (merchant_account, currency, book, account, at, balance)
      VALUES ('acme', 'USD', 'live', 'available', '2026-09-01T00:00Z', 0), ('acme', 'USD', 'live', 'available', '2026-10-01T00:00Z', 7)`.execute(
      t.db,
    );
    const doc = await closeDocument(t.db, scope('2026-09', 'USD'));
    expect(doc.proof).toBe('7.00');
    await expect(prepareClose(t.db, scope('2026-09', 'USD'), 'ana', new Date())).rejects.toMatchObject({
      code: 'CONFLICT',
      message: expect.stringMatching(/proof .* is not zero/),
    });
  });

  it('knows the first posting of each ledger and refuses to sign a month before it', async () => {
    const ledgers = await closeLedgers(t.db);
    expect(ledgers).toEqual([
      { merchantAccount: 'acme', currency: 'BRL', firstPostingAt: new Date('2026-08-10T12:00Z') },
      { merchantAccount: 'acme', currency: 'USD', firstPostingAt: new Date('2026-08-20T10:00Z') },
    ]);
    await expect(prepareClose(t.db, scope('2026-07'), 'ana', new Date())).rejects.toMatchObject({
      code: 'CONFLICT',
      message: 'acme BRL has no entries before 2026-08: 2026-07 has no figures to sign',
    });
    expect(await getCloseRecord(t.db, 'acme', 'BRL', '2026-07')).toBeNull();
    await sql`INSERT INTO ledger_accounts (merchant_account, currency, book, name) VALUES ('acme', 'EUR', 'live', 'available')`.execute(
      t.db,
    );
    await expect(prepareClose(t.db, scope('2026-07', 'EUR'), 'ana', new Date())).rejects.toMatchObject({
      code: 'CONFLICT',
      message: 'acme EUR has no entries yet: 2026-07 has no figures to sign',
    });
    await expect(prepareClose(t.db, scope('2026-07', 'XXX'), 'ana', new Date())).rejects.toMatchObject({
      code: 'NOT_FOUND',
      message: expect.stringMatching(/^acme has no ledger in XXX \(known: BRL, EUR/),
    });
  });
});
