/**
 * The month close's bank proof on the real database: the last statement at the cut-off against the
 * ledger's bank account, what explains their difference (the opening balance before the first imported
 * statement, the bank lines not in the ledger) and the unexplained rest, 0.00 here and not when a ledger
 * entry is off; the items unmatched at the cut-off (a match created after it does not count) in two
 * groups, bank lines and settlements in transit; and the sign-off refused while an item above the
 * configured amount has no note, of either group: preparing refused, prepared under a higher amount,
 * approval refused under the lower one until notes are added; an item below the amount never blocks.
 * The bank proof is inside the signed, hashed text; a close signed in version 1 still verifies, approves
 * and reads.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BankProofSettings } from '../../src/db/closes/bank-proof.ts';
import { closeDocument } from '../../src/db/closes/document.ts';
import { getCloseRecord } from '../../src/db/closes/records.ts';
import { approveClose, prepareClose } from '../../src/db/closes/service.ts';
import { canonicalJson, sha256Hex } from '../../src/domain/close.ts';
import { bankProofLines, closeScope } from '../../src/reports/close.ts';
import { periodOf } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import {
  BANK,
  bankProofMonth,
  commentOn,
  importOf,
  line,
  SIGNED_V1,
  storeSignedV1,
} from './bank-proof-fixtures.ts';
import { bookEntry } from './close-fixtures.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';

let t: TestDatabase;
let exceptions: Record<string, string>;
beforeAll(async () => {
  t = await createTestDatabase();
  exceptions = await bankProofMonth(t.db);
});
afterAll(async () => {
  await t?.drop();
});

const bank = (noteAbove: bigint): BankProofSettings => ({ accounts: [BANK], noteAbove });
const scope = (noteAbove: bigint) => closeScope('acme', 'BRL', '2026-09', 'UTC', '00:00', bank(noteAbove));
const NOW = new Date('2026-10-05T10:00Z');
const key = { merchantAccount: 'acme', currency: 'BRL', period: '2026-09' };

describe('the close bank proof', () => {
  it('puts the statement against the ledger at the cut-off and lists the unmatched items', async () => {
    const doc = await closeDocument(t.db, scope(100n));
    expect(doc.noteAbove).toBe('1.00');
    expect(doc.bankProof).toHaveLength(1);
    const p = doc.bankProof![0]!;
    expect(p.statement).toMatchObject({ statementId: 'S-0930', date: '2026-09-29' });
    expect(p.statementClosing).toBe('470.50');
    expect(p.ledger).toBe('500.00');
    expect(p.difference).toBe('-29.50');
    expect(
      p.unmatched.map((u) => [u.kind, u.id, u.amount, u.date, u.ageDays, u.noted, u.exceptionId]),
    ).toEqual([
      ['bank_line', 'L-RENT', '-30.00', '2026-09-28', 2, false, exceptions['L-RENT']],
      ['bank_line', 'L-SMALL', '0.50', '2026-09-29', 1, false, exceptions['L-SMALL']],
      ['settlement', 'ST-2', '200.00', '2026-09-29', 1, false, exceptions['ST-2']],
    ]);
    // The difference explained: S-0930 is the first statement (opening 0.00), the two lines are not in
    // the ledger, nothing is left; the settlement is in transit, no part of it; no total of everything.
    expect(doc.v).toBe(2);
    expect(p).toMatchObject({
      firstStatement: { statementId: 'S-0930', date: '2026-09-12' },
      openingBeforeFirst: '0.00',
      linesNotInLedger: '-29.50',
      linesAfterStatement: '0.00',
      inTransit: '200.00',
      unexplained: '0.00',
    });
    expect(p.unmatchedTotal).toBeUndefined();
    expect(bankProofLines(doc)).toEqual([
      'bank BR00ACME: statement S-0930 of 2026-09-29 closing 470.50; ledger bank:BR00ACME 500.00; difference -29.50; explained by: opening before the first statement 0.00 (S-0930 of 2026-09-12), bank lines not in the ledger -29.50 (2); unexplained 0.00',
      '  bank lines not in the ledger at the cut-off: 2 booked on or before 2026-09-29 (-29.50)',
      `    bank_line L-RENT -30.00 of 2026-09-28, 2 days: no note (exception ${exceptions['L-RENT']})`,
      `    bank_line L-SMALL 0.50 of 2026-09-29, 1 day: no note (exception ${exceptions['L-SMALL']})`,
      '  settlements in transit, not seen in the bank (no part of the bank difference): 1 (200.00)',
      `    settlement ST-2 200.00 of 2026-09-29, 1 day: no note (exception ${exceptions['ST-2']})`,
    ]);
    // Without configured bank accounts the document has no bank proof (as closes signed before it).
    const plain = await closeDocument(t.db, closeScope('acme', 'BRL', '2026-09', 'UTC', '00:00'));
    expect(plain.bankProof).toBeUndefined();
  });

  it('says "no statement" before any statement', async () => {
    const doc = await closeDocument(t.db, closeScope('acme', 'BRL', '2026-08', 'UTC', '00:00', bank(0n)));
    expect(doc.bankProof![0]).toMatchObject({
      statement: null,
      statementClosing: null,
      difference: null,
      ledger: '0.00',
    });
  });

  it('refuses sign-off while an item above the amount has no note, and signs once noted', async () => {
    await expect(prepareClose(t.db, scope(100n), 'ana', NOW)).rejects.toThrow(
      /^2 unmatched items above 1\.00 at the cut-off have no note: bank_line L-RENT \(-30\.00\), settlement ST-2 \(200\.00\); add a note/,
    );
    // Above 250.00 nothing needs a note: prepared, the bank proof frozen in the signed text.
    const prepared = await prepareClose(t.db, scope(25_000n), 'ana', NOW);
    expect(prepared.verified).toBe(true);
    expect(prepared.canonical).toContain('"bankProof":[');
    expect(sha256Hex(prepared.canonical)).toBe(prepared.sha256);
    expect(prepared.document.bankProof?.[0]?.difference).toBe('-29.50');
    // Approving under 1.00: refused while L-RENT and ST-2 have no note (L-SMALL, 0.50, never blocks).
    await expect(approveClose(t.db, key, 'bob', NOW, 100n)).rejects.toThrow(
      /^2 unmatched items above 1\.00 .*bank_line L-RENT \(-30\.00\), settlement ST-2 \(200\.00\)/,
    );
    await commentOn(t.db, exceptions['L-RENT']!, 'October rent, paid from the settlement account');
    await expect(approveClose(t.db, key, 'bob', NOW, 100n)).rejects.toThrow(
      /^1 unmatched item above 1\.00 at the cut-off has no note: settlement ST-2 \(200\.00\);/,
    );
    await t.db
      .updateTable('exceptions')
      .set({ acknowledgement_note: 'credited on 2 October', acknowledged_by: 'ana', acknowledged_at: NOW })
      .where('id', '=', exceptions['ST-2']!)
      .execute();
    const approved = await approveClose(t.db, key, 'bob', NOW, 100n);
    expect(approved.status).toBe('approved');
    const record = await getCloseRecord(t.db, 'acme', 'BRL', '2026-09');
    expect(record?.verified).toBe(true);
    // The frozen proof keeps what was true at signing.
    expect(record?.document.bankProof?.[0]?.unmatched.map((u) => u.noted)).toEqual([false, false, false]);
    // Computed now, the notes show.
    const now = await closeDocument(t.db, scope(100n));
    expect(now.bankProof?.[0]?.unmatched.map((u) => u.noted)).toEqual([true, false, true]);
  });

  it('writes the signed bank proof into the month workbook, read back', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'payrecon-bank-proof-'));
    try {
      const out = join(dir, 'september.xlsx');
      await writeSettlementWorkbook(t.db, {
        period: periodOf('2026-09-01', '2026-09-30', 'UTC'),
        account: 'acme',
        out,
      });
      const wb = new ExcelJS.Workbook();
      await wb.xlsx.readFile(out);
      const ws = wb.getWorksheet('Bank proof');
      expect(ws).toBeDefined();
      expect(ws!.pageSetup.orientation).toBe('portrait');
      expect(ws!.pageSetup.fitToWidth).toBe(1);
      const rows: unknown[][] = [];
      ws!.eachRow((row) => {
        rows.push((row.values as unknown[]).slice(1));
      });
      const find = (label: string) => rows.find((r) => r[0] === label);
      expect(find('Statement')?.[1]).toBe('S-0930 of 2026-09-29');
      expect(find('Statement closing balance')?.[1]).toBe(470.5);
      expect(find('Ledger bank:BR00ACME')?.[1]).toBe(500);
      const difference = find('Difference')?.[1] as { formula: string; result: number };
      expect(difference.formula).toMatch(/^B\d+-B\d+$/);
      expect(difference.result).toBe(-29.5);
      expect(
        rows.filter((r) => String(r[0]).startsWith('bank line') || String(r[0]).startsWith('settlement')),
      ).toEqual([
        ['bank line L-RENT', -30, '2026-09-28', 2, 'no note', 'REF-L-RENT', exceptions['L-RENT']],
        ['bank line L-SMALL', 0.5, '2026-09-29', 1, 'no note', 'REF-L-SMALL', exceptions['L-SMALL']],
        ['settlement ST-2', 200, '2026-09-29', 1, 'no note', 'BR-ST-2', exceptions['ST-2']],
      ]);
      const opening = find('Balance before the first imported statement (S-0930 of 2026-09-12)');
      expect(opening?.[1]).toBe(0);
      expect(find('Bank lines not in the ledger, booked on or before 2026-09-29 (2)')?.[1]).toBe(-29.5);
      const unexplained = find('Unexplained difference')?.[1] as { formula: string; result: number };
      expect(unexplained.formula).toMatch(/^B\d+-B\d+-B\d+$/);
      // (exceljs reads a formula's stored result of 0 back as none)
      expect(unexplained.result ?? 0).toBe(0);
      const lines = find('Total booked on or before 2026-09-29 (2)')?.[1] as {
        formula: string;
        result: number;
      };
      expect(lines.formula).toMatch(/^SUM\(B\d+:B\d+\)$/);
      expect(lines.result).toBe(-29.5);
      const inTransit = find('Total (1)')?.[1] as { formula: string; result: number };
      expect(inTransit.formula).toMatch(/^SUM\(B\d+:B\d+\)$/);
      expect(inTransit.result).toBe(200);
      expect(rows.some((r) => String(r[0]).startsWith('Settlements in transit, not seen in the bank'))).toBe(
        true,
      );
      expect(rows.some((r) => String(r[0]).startsWith('Total (3)'))).toBe(false);
      expect(rows.some((r) => String(r[0]).includes('Month close 2026-09 · acme BRL · approved'))).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('names the statement by its closing balance date when the import kept it', async () => {
    // A later import of the month's last statement (no new lines), its CLBD dated the 30th.
    const { rows } = await sql<{ id: string }>`
      INSERT INTO imports (kind, file_name, sha256, imported_by, lines, new_lines)
      VALUES ('bank-statement', 'sept-last.xml', ${'b'.repeat(64)}, 'ana', 0, 0) RETURNING id::text AS id`.execute(
      t.db,
    );
    await sql`INSERT INTO import_statements (import_id, position, statement_id, format, bank_account, currency, opening,
        closing, credits, debits, booked, pending, new_lines, closing_date)
      VALUES (${rows[0]!.id}::bigint, 1, 'S-0930-END', 'camt.053.001.08', ${BANK.id}, 'BRL', 470.50, 470.50, 0, 0, 0, 0, 0,
        '2026-09-30')`.execute(t.db);
    const doc = await closeDocument(t.db, scope(100n));
    expect(doc.bankProof?.[0]).toMatchObject({
      statement: { statementId: 'S-0930-END', date: '2026-09-30' },
      statementClosing: '470.50',
      difference: '-29.50',
    });
  });
});

describe('the close bank proof when something is off', () => {
  let off: TestDatabase;
  beforeAll(async () => {
    off = await createTestDatabase();
    await bankProofMonth(off.db);
  });
  afterAll(async () => {
    await off?.drop();
  });

  it('shows a ledger entry that is off as the unexplained difference, and keeps later lines apart', async () => {
    // A bank match entry of September that puts 1.00 into the bank account with no bank line for it.
    await bookEntry(
      off.db,
      'bank_match',
      'm-off',
      'bank_match',
      [
        [`bank:${BANK.id}`, '1.00'],
        ['settlements_in_transit', '-1.00'],
      ],
      '2026-09-20T10:00Z',
    );
    // A line booked on the 30th, in a statement of 30 September to 1 October imported in October: after
    // the last statement of the month (S-0930 of the 29th), so in no statement reconciled here.
    const late = await importOf(off.db, 'bank-statement', 'late.xml', '2026-10-01T20:00Z');
    await sql`INSERT INTO import_statements (import_id, position, statement_id, format, bank_account, currency, opening,
        closing, credits, debits, booked, pending, new_lines, closing_date)
      VALUES (${late}::bigint, 1, 'S-1001', 'camt.053.001.08', ${BANK.id}, 'BRL', 470.50, 463.50, 0, -7.00, 1, 0, 1,
        '2026-10-01')`.execute(off.db);
    await line(off.db, late, 'L-LATE', '2026-09-30', '-7.00');
    const doc = await closeDocument(off.db, scope(100n));
    const p = doc.bankProof![0]!;
    expect(p).toMatchObject({
      statement: { statementId: 'S-0930', date: '2026-09-29' },
      ledger: '501.00',
      difference: '-30.50',
      openingBeforeFirst: '0.00',
      linesNotInLedger: '-29.50',
      linesAfterStatement: '-7.00',
      unexplained: '-1.00',
    });
    expect(p.unmatched.map((u) => u.id)).toEqual(['L-RENT', 'L-SMALL', 'L-LATE', 'ST-2']);
    // The later line is under the note rule like the others.
    await expect(prepareClose(off.db, scope(100n), 'ana', NOW)).rejects.toThrow(
      /^3 unmatched items above 1\.00 .*bank_line L-RENT \(-30\.00\), bank_line L-LATE \(-7\.00\), settlement ST-2 \(200\.00\)/,
    );
    const text = bankProofLines(doc);
    expect(text[0]).toMatch(/; unexplained -1\.00$/);
    expect(text).toContain(
      '  bank lines not in the ledger at the cut-off: 2 booked on or before 2026-09-29 (-29.50); 1 booked after the statement (-7.00)',
    );
    expect(
      text.some((l) => l.startsWith('    bank_line L-LATE -7.00 of 2026-09-30, 0 days, after the statement')),
    ).toBe(true);
  });

  it('says the unexplained difference is unknown when the first statement gives no opening balance', async () => {
    await sql`UPDATE import_statements SET opening = NULL WHERE statement_id = 'S-0930'`.execute(off.db);
    const p = (await closeDocument(off.db, scope(100n))).bankProof![0]!;
    expect(p).toMatchObject({ openingBeforeFirst: null, unexplained: null, difference: '-30.50' });
  });

  it('keeps a close signed in version 1 verifying, approving and reading as it was signed', async () => {
    expect(canonicalJson(JSON.parse(SIGNED_V1.canonical))).toBe(SIGNED_V1.canonical);
    expect(sha256Hex(SIGNED_V1.canonical)).toBe(SIGNED_V1.sha256);
    await storeSignedV1(off.db);
    const record = await getCloseRecord(off.db, 'acme', 'BRL', SIGNED_V1.period);
    expect(record).toMatchObject({
      verified: true,
      sha256: SIGNED_V1.sha256,
      canonical: SIGNED_V1.canonical,
    });
    expect(record!.document.v).toBe(1);
    expect(bankProofLines(record!.document)).toEqual([
      'bank BR00OLD: statement S-0730 of 2026-07-30 closing 470.50; ledger bank:BR00OLD 500.00; difference -29.50; unmatched 2 (170.00)',
      '    bank_line L-OLD-RENT -30.00 of 2026-07-30, 1 day: noted',
      '    settlement ST-OLD 200.00 of 2026-07-31, 0 days: noted',
    ]);
    // Its items carry their notes in the signed text and by no exception: approving under 1.00 checks
    // them against the notes now, so they block until noted; above them, approved, still verifying.
    await expect(
      approveClose(off.db, { ...key, period: SIGNED_V1.period }, 'bob', NOW, 100n),
    ).rejects.toThrow(/^2 unmatched items above 1\.00/);
    const approved = await approveClose(off.db, { ...key, period: SIGNED_V1.period }, 'bob', NOW, 50_000n);
    expect(approved).toMatchObject({ status: 'approved', verified: true, sha256: SIGNED_V1.sha256 });
  });
});
