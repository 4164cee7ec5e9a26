import { afterAll, describe, expect, it } from 'vitest';
import { closeDocument } from '../../src/db/closes/document.ts';
import { recordImport } from '../../src/db/imports/service.ts';
import { reconciliationDay } from '../../src/db/read-models/reconciliation.ts';
import { formatAmount, parseLedgerMinor } from '../../src/domain/money.ts';
import { closeScope } from '../../src/reports/close.ts';
import { createTestDatabase, type TestDatabase } from './helpers.ts';
import { DAYS, dateOf, NOW, run, sandboxFiles } from './sandbox-cash-files.ts';

const databases: TestDatabase[] = [];
afterAll(async () => {
  for (const t of databases.splice(0)) await t.drop();
});

describe('the close bank proof over the sandbox files', () => {
  it("lists what matching left unmatched, with the month's last statement", async () => {
    const setup = await sandboxFiles();
    const t = await createTestDatabase();
    databases.push(t);
    for (const file of setup.files) await recordImport(t.db, file);
    await run(t, setup);
    const exceptions = await t.db
      .selectFrom('exceptions')
      .select(['id', 'type', 'entity_id'])
      .where('state', '<>', 'resolved')
      .execute();
    const raised = (type: string) =>
      new Map(exceptions.filter((x) => x.type === type).map((x) => [x.entity_id, String(x.id)]));
    const unmatchedLines = raised('BANK_LINE_UNMATCHED');
    const notReceived = raised('SETTLEMENT_NOT_RECEIVED');
    expect(unmatchedLines.size).toBeGreaterThan(0);
    expect(notReceived.size).toBeGreaterThan(0);
    const lines: string[] = [];
    const settlements: string[] = [];
    for (const currency of [...new Set(setup.bankAccounts.map((b) => b.currency))]) {
      const doc = await closeDocument(
        t.db,
        closeScope('sandbox', currency, '2026-03', 'UTC', '00:00', {
          accounts: setup.bankAccounts,
          noteAbove: 0n,
        }),
      );
      for (const p of doc.bankProof ?? []) {
        // The last statement of the month: the last day imported, its closing balance as in the file.
        expect(p.statement?.date, p.bankAccount).toBe(dateOf(DAYS - 1));
        const last = setup.files
          .filter((f) => f.kind === 'bank-statement')
          .flatMap((f) => (f.kind === 'bank-statement' ? f.statements : []))
          .filter((s) => s.bankAccount === p.bankAccount && s.closingDate === dateOf(DAYS - 1));
        expect(last.map((s) => s.closing)).toContain(p.statementClosing);
        for (const u of p.unmatched) {
          expect(u.noted).toBe(false);
          if (u.kind === 'bank_line') {
            lines.push(u.id);
            expect(u.exceptionId).toBe(unmatchedLines.get(u.id));
          } else {
            settlements.push(u.id);
            expect(u.exceptionId).toBe(notReceived.get(u.id) ?? null);
          }
        }
      }
    }
    expect(lines.sort()).toEqual([...unmatchedLines.keys()].sort());
    for (const id of notReceived.keys()) expect(settlements).toContain(id);

    // Explained: the ledger's entries were booked now (matching ran with a clock of March), so the close
    // of this month has them all before its cut-off, with the same statement and the same items. Its
    // difference is the balance before the first statement (that of the first day's file) plus the
    // unmatched lines: nothing unexplained; the settlements in transit are apart.
    const thisMonth = new Date().toISOString().slice(0, 7);
    const statements = setup.files.flatMap((f) => (f.kind === 'bank-statement' ? f.statements : []));
    let explained = 0;
    for (const currency of [...new Set(setup.bankAccounts.map((b) => b.currency))]) {
      const doc = await closeDocument(
        t.db,
        closeScope('sandbox', currency, thisMonth, 'UTC', '00:00', {
          accounts: setup.bankAccounts,
          noteAbove: 0n,
        }),
      );
      for (const p of doc.bankProof ?? []) {
        // The statement whose lines start earliest.
        const firstDay = (st: (typeof statements)[number]) =>
          st.lines.map((l) => l.booking_date).sort()[0] ?? '';
        const first = statements
          .filter((st) => st.bankAccount === p.bankAccount && st.lines.length > 0)
          .sort((a, b) => firstDay(a).localeCompare(firstDay(b)))[0]!;
        expect(p.firstStatement?.date, p.bankAccount).toBe(firstDay(first));
        expect(p.firstStatement?.statementId ?? null).toBe(first.statementId);
        expect(parseLedgerMinor(p.openingBeforeFirst)).toBe(parseLedgerMinor(String(first.opening)));
        expect(parseLedgerMinor(p.openingBeforeFirst)).not.toBe(0n);
        const total = (kind: string) =>
          formatAmount(
            p.unmatched.filter((u) => u.kind === kind).reduce((s, u) => s + parseLedgerMinor(u.amount), 0n),
          );
        expect(p.linesNotInLedger).toBe(total('bank_line'));
        expect(p.linesAfterStatement).toBe('0.00');
        expect(p.inTransit).toBe(total('settlement'));
        expect(parseLedgerMinor(p.ledger)).toBeGreaterThan(0n);
        expect(p.unexplained, p.bankAccount).toBe('0.00');
        explained++;
      }
    }
    expect(explained).toBe(setup.bankAccounts.length);

    // The Reconciliation page's day, every statement day of every bank account (camt.053 001.02, 001.08
    // and the bank CSV by turns): closing - opening before the first statement - the lines unmatched
    // booked to date = the ledger's bank account at the day's end, nothing unexplained.
    let days = 0;
    for (const b of setup.bankAccounts) {
      const bank = { ...b, name: b.id };
      let opening: bigint | null = null;
      let unmatched = 0n;
      for (let n = 0; n < DAYS; n++) {
        const day = await reconciliationDay(t.db, bank, dateOf(n), 'UTC', NOW);
        unmatched += day.unmatched.reduce((sum, l) => sum + l.amount, 0n);
        opening ??= day.lines.length > 0 ? day.statement.opening : null;
        if (day.lines.length === 0) continue;
        expect(day.proof.firstStatement?.opening, `${b.id} ${day.date}`).toBe(opening);
        expect(day.proof.notInLedger.total, `${b.id} ${day.date}`).toBe(unmatched);
        if (day.statement.closing === null) continue;
        expect(day.statement.closing - opening! - unmatched, `${b.id} ${day.date}`).toBe(day.ledger);
        expect(day.proof.unexplained, `${b.id} ${day.date}`).toBe(0n);
        days++;
      }
    }
    expect(days).toBeGreaterThan(DAYS / 2);
  });
});
