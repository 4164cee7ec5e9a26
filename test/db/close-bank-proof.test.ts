/**
 * The month close's bank proof on the real database: the last statement at the cut-off against the
 * ledger's bank account, the items unmatched at the cut-off (a match created after it does not count),
 * and the sign-off refused while an item above the configured amount has no note: preparing refused,
 * prepared under a higher amount, approval refused under the lower one until notes are added; an item
 * below the amount never blocks. The bank proof is inside the signed, hashed text.
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
import { sha256Hex } from '../../src/domain/close.ts';
import { closeScope } from '../../src/reports/close.ts';
import { periodOf } from '../../src/reports/period.ts';
import { writeSettlementWorkbook } from '../../src/reports/settlement-workbook.ts';
import { BANK, bankProofMonth, commentOn } from './bank-proof-fixtures.ts';
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
    expect(p.unmatchedTotal).toBe('170.50');
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
      const total = find('Total (3)')?.[1] as { formula: string; result: number };
      expect(total.formula).toMatch(/^SUM\(B\d+:B\d+\)$/);
      expect(total.result).toBe(170.5);
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
