/**
 * The month close from the command line (`payrecon close prepare|approve|show`) and the close scope of a
 * month, shared with the page and the API: a month of one merchant account and currency, read in the
 * report time zone and cut-off like the settlement workbook's periods.
 */

import type ExcelJS from 'exceljs';
import type { OpenDatabase } from '../db/cli.ts';
import type { BankProofSettings } from '../db/closes/bank-proof.ts';
import { type CloseScope, closeDocument, postCloseAdjustments } from '../db/closes/document.ts';
import { type CloseRecord, getCloseRecord } from '../db/closes/records.ts';
import { closeLedgerOf } from '../db/closes/scopes.ts';
import { approveClose, prepareClose } from '../db/closes/service.ts';
import { createDb } from '../db/connection.ts';
import {
  afterStatement,
  CLOSE_PERIOD_RE,
  type CloseBankProofLine,
  type CloseDocument,
  type CloseUnmatchedItem,
  type ExplainedBankProofLine,
  isExplained,
} from '../domain/close.ts';
import { AppError } from '../domain/errors.ts';
import { formatAmount, type Minor, minorToCell, parseLedgerMinor } from '../domain/money.ts';
import { monthOfInstant, monthPeriod } from './period.ts';
import { BOLD, MONEY_FORMAT, type PrintRule, type PrintSetup, printOptions } from './sheet-writer.ts';

/** The close scope of a month, read in the time zone and cut-off. */
export function closeScope(
  merchantAccount: string,
  currency: string,
  period: string,
  timeZone: string,
  cutoff: string,
  bank?: BankProofSettings,
): CloseScope {
  const p = monthPeriod(period, timeZone, cutoff);
  return {
    ...(bank ? { bank } : {}),
    merchantAccount,
    currency,
    period,
    timeZone,
    start: p.start,
    end: p.end,
    monthOf: (instant) => monthOfInstant(instant, timeZone, cutoff),
  };
}

export interface CloseCliOptions {
  account: string;
  currency: string;
  period: string;
  /**
   * Who prepares or approves: the configured user the command authenticated (src/cli-auth.ts), asked
   * once the arguments are checked and before the database is opened; it throws to refuse.
   */
  actingUser: () => Promise<string>;
  /** The report time zone and settlement cut-off (PAYRECON_TIMEZONE, PAYRECON_SETTLEMENT_CUTOFF). */
  timeZone: string;
  cutoff: string;
  /** The bank accounts (PAYRECON_BANK_ACCOUNTS) and PAYRECON_CLOSE_UNMATCHED_NOTE_ABOVE. */
  bank?: BankProofSettings;
}

/** A close's figures as the terminal prints them: one line per account, then the totals. */
export function describeClose(doc: CloseDocument, record: CloseRecord | null, postClose: number): string[] {
  const head = record
    ? `close ${doc.period} ${doc.merchantAccount} ${doc.currency}: ${record.status}; prepared and signed by ${record.preparedBy} at ${record.preparedAt.toISOString()}${record.approvedBy ? `, approved by ${record.approvedBy} at ${record.approvedAt?.toISOString()}` : ', not approved yet'}; sha256 ${record.sha256} ${record.verified ? 'matches the stored figures' : 'DOES NOT MATCH the stored figures'}`
    : `close ${doc.period} ${doc.merchantAccount} ${doc.currency}: not signed; figures computed now`;
  return [
    head,
    `period ${doc.start} to ${doc.end} (${doc.timeZone})`,
    ...doc.accounts.map(
      (a) =>
        `  ${a.book}/${a.account}: opening ${a.opening} + movements ${a.movements} - closing ${a.closing} = ${a.proof}`,
    ),
    ...bankProofLines(doc),
    `proof ${doc.proof}; in flight at the cut-off ${doc.inFlight.length} (${doc.inFlightTotal}, reserved ${doc.reservedAtEnd}); exceptions open ${doc.exceptions.length} (${doc.exceptionsTotal}); post-close adjustments ${postClose}`,
  ];
}

const statementText = (st: NonNullable<CloseBankProofLine['statement']>) =>
  `${st.statementId ?? `import ${st.importId}`} of ${st.date}`;

const itemText = (u: CloseUnmatchedItem, mark = '') =>
  `    ${u.kind} ${u.id} ${u.amount} of ${u.date}, ${u.ageDays} day${u.ageDays === 1 ? '' : 's'}${mark}: ${u.noted ? 'noted' : 'no note'}${u.exceptionId ? ` (exception ${u.exceptionId})` : ''}`;

/**
 * The bank proof as the terminal prints it: a line per bank account with its reconciliation (the
 * difference, what explains it, the unexplained rest), then the bank lines not in the ledger and the
 * settlements in transit, one line per item. A close signed before the proof explained its difference
 * (version 1) prints as it was signed: one list and one total.
 */
export function bankProofLines(doc: CloseDocument): string[] {
  return (doc.bankProof ?? []).flatMap((p) => {
    const head = `bank ${p.bankAccount}: statement ${p.statement ? `${statementText(p.statement)} closing ${p.statementClosing ?? 'without a balance'}` : 'none'}; ledger bank:${p.bankAccount} ${p.ledger}; difference ${p.difference ?? 'n/a'}`;
    if (!isExplained(p)) {
      return [
        `${head}; unmatched ${p.unmatched.length} (${p.unmatchedTotal ?? 'n/a'})`,
        ...p.unmatched.map((u) => itemText(u)),
      ];
    }
    const lines = p.unmatched.filter((u) => u.kind === 'bank_line');
    const later = lines.filter((u) => afterStatement(p, u));
    const settlements = p.unmatched.filter((u) => u.kind === 'settlement');
    const first = p.firstStatement ? ` (${statementText(p.firstStatement)})` : '';
    return [
      `${head}; explained by: opening before the first statement ${p.openingBeforeFirst ?? 'unknown'}${first}, bank lines not in the ledger ${p.linesNotInLedger} (${lines.length - later.length}); unexplained ${p.unexplained ?? 'unknown'}`,
      `  bank lines not in the ledger at the cut-off: ${lines.length - later.length}${p.statement ? ` booked on or before ${p.statement.date}` : ''} (${p.linesNotInLedger})${later.length ? `; ${later.length} booked after the statement (${p.linesAfterStatement})` : ''}`,
      ...lines.map((u) => itemText(u, afterStatement(p, u) ? ', after the statement' : '')),
      `  settlements in transit, not seen in the bank (no part of the bank difference): ${settlements.length} (${p.inTransit})`,
      ...settlements.map((u) => itemText(u)),
    ];
  });
}

export async function runCloseCli(
  action: 'prepare' | 'approve' | 'show',
  opts: CloseCliOptions,
  open: OpenDatabase,
): Promise<void> {
  if (!CLOSE_PERIOD_RE.test(opts.period)) {
    throw new AppError('VALIDATION_FAILED', `--period: must be a month YYYY-MM (got ${opts.period})`);
  }
  const scope = closeScope(opts.account, opts.currency, opts.period, opts.timeZone, opts.cutoff, opts.bank);
  const by = action === 'show' ? '' : await opts.actingUser();
  const database = await open();
  const db = createDb(database.url, 4);
  try {
    // The one check of account and currency (src/db/closes/scopes.ts), before anything is written.
    const ledger = await closeLedgerOf(db, opts.account, opts.currency).catch((err: unknown) => {
      const field = err instanceof AppError ? err.details?.field : undefined;
      if (err instanceof AppError && err.code === 'NOT_FOUND' && typeof field === 'string') {
        throw new AppError('VALIDATION_FAILED', `--${field}: ${err.message}`);
      }
      throw err;
    });
    const now = new Date();
    if (action === 'prepare') await prepareClose(db, scope, by, now);
    if (action === 'approve') {
      await approveClose(
        db,
        { merchantAccount: opts.account, currency: opts.currency, period: opts.period },
        by,
        now,
        opts.bank?.noteAbove,
      );
    }
    const record = await getCloseRecord(db, opts.account, opts.currency, opts.period);
    const doc = record ? record.document : await closeDocument(db, scope);
    const late = await postCloseAdjustments(db, scope);
    const lines = describeClose(doc, record, late.length);
    const first = ledger.firstPostingAt;
    if (!record && (first === null || first.getTime() >= scope.end.getTime())) {
      lines.push(
        `nothing to close: ${opts.account} ${opts.currency} has ${first === null ? 'no entries yet' : `no entries before ${scope.monthOf(first)}`}`,
      );
    } else if (doc.movements.length === 0) {
      lines.push('no entries booked in the month: the closing balances are the opening ones');
    }
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await db.destroy();
    await database.stop();
  }
}

/** The bank proof sheet prints on portrait pages, as wide as the page. */
export const BANK_PROOF_PRINT: PrintRule = { orientation: 'portrait', fit: 'width', minScale: 70 };

/**
 * The `Bank proof` sheet of a workbook: per signed close with a bank proof, per bank account, the
 * statement against the ledger (the difference a formula over the two cells when both are exact numbers),
 * what explains the difference (the balance before the first imported statement, the bank lines not in
 * the ledger) and the unexplained difference (a formula over those cells), then the bank lines not in the
 * ledger and the settlements in transit, each group with its total (a SUM over its rows). A close signed
 * in version 1 lists its unmatched items under one total, as signed. Amounts in column B. Nothing when
 * no close has a bank proof.
 */
/** The columns of an unmatched item's row on the Bank proof sheet, after its label. */
const ITEM_COLUMNS = ['Amount', 'Date', 'Age (days)', 'Note', 'Reference', 'Exception'];

export function writeBankProofSheet(
  wb: ExcelJS.stream.xlsx.WorkbookWriter,
  closes: readonly { document: CloseDocument; status: string; sha256: string }[],
  print: PrintSetup,
): void {
  const withProof = closes.filter((c) => c.document.bankProof !== undefined);
  if (withProof.length === 0) return;
  const ws = wb.addWorksheet('Bank proof', {
    views: [{ state: 'frozen', ySplit: 1 }],
    ...printOptions(print, 1, BANK_PROOF_PRINT),
  });
  ws.columns = [
    { key: 'label', width: 34 },
    { key: 'amount', width: 18, style: { numFmt: MONEY_FORMAT } },
    { key: 'date', width: 12 },
    { key: 'age', width: 11 },
    { key: 'note', width: 12 },
    { key: 'reference', width: 22 },
    { key: 'exception', width: 11 },
  ];
  const n = (text: string | null): number | string | null =>
    text === null ? null : minorToCell(parseLedgerMinor(text));
  const exact = (...values: (string | null)[]) =>
    values.every((v) => v !== null && typeof minorToCell(parseLedgerMinor(v)) === 'number');
  const bold = (values: unknown[]) => {
    const row = ws.addRow(values);
    row.font = BOLD;
    row.commit();
    return row.number;
  };
  /** The items' rows; the first and last row numbers (0 when none). */
  const items = (list: readonly CloseUnmatchedItem[], mark: (u: CloseUnmatchedItem) => string = () => '') => {
    let first = 0;
    let last = 0;
    for (const u of list) {
      const row = ws.addRow([
        `${u.kind === 'bank_line' ? 'bank line' : 'settlement'} ${u.id}${mark(u)}`,
        n(u.amount),
        u.date,
        u.ageDays,
        u.noted ? 'noted' : 'no note',
        u.reference ?? '',
        u.exceptionId ?? '',
      ]);
      if (first === 0) first = row.number;
      last = row.number;
      row.commit();
    }
    return { first, last };
  };
  /** A total of items: a SUM over their rows when every amount is an exact number, else the text. */
  const total = (
    list: readonly CloseUnmatchedItem[],
    text: string | null,
    range: { first: number; last: number },
  ) => {
    if (list.length === 0) return 0;
    const sum = formatAmount(list.reduce<Minor>((t, u) => t + parseLedgerMinor(u.amount), 0n));
    return exact(text ?? sum, ...list.map((u) => u.amount))
      ? { formula: `SUM(B${range.first}:B${range.last})`, result: n(text ?? sum) as number }
      : (text ?? sum);
  };
  /** Version 2: what explains the difference, then the bank lines and the settlements in transit. */
  const writeExplained = (p: ExplainedBankProofLine, differenceRow: number) => {
    const lines = p.unmatched.filter((u) => u.kind === 'bank_line');
    const before = lines.filter((u) => !afterStatement(p, u));
    const later = lines.filter((u) => afterStatement(p, u));
    const settlements = p.unmatched.filter((u) => u.kind === 'settlement');
    const upTo = p.statement ? `booked on or before ${p.statement.date}` : 'no statement';
    bold(['Explained by']);
    const openingRow = ws.addRow([
      `Balance before the first imported statement${p.firstStatement ? ` (${statementText(p.firstStatement)})` : ''}`,
      n(p.openingBeforeFirst),
    ]);
    openingRow.commit();
    const linesRow = ws.addRow([
      `Bank lines not in the ledger, ${upTo} (${before.length})`,
      n(p.linesNotInLedger),
    ]);
    linesRow.commit();
    const unexplained =
      p.unexplained === null
        ? 'unknown'
        : exact(p.unexplained, p.difference, p.openingBeforeFirst, p.linesNotInLedger)
          ? {
              formula: `B${differenceRow}-B${openingRow.number}-B${linesRow.number}`,
              result: n(p.unexplained) as number,
            }
          : p.unexplained;
    bold(['Unexplained difference', unexplained]);
    ws.addRow([]).commit();
    bold(['Bank lines not in the ledger at the cut-off', ...ITEM_COLUMNS]);
    const range = items(before);
    bold([`Total ${upTo} (${before.length})`, total(before, p.linesNotInLedger, range)]);
    if (later.length > 0) {
      const after = items(later, () => ' (after the statement)');
      bold([`Booked after the statement (${later.length})`, total(later, p.linesAfterStatement, after)]);
    }
    ws.addRow([]).commit();
    bold(['Settlements in transit, not seen in the bank (no part of the bank difference)', ...ITEM_COLUMNS]);
    const inTransit = items(settlements);
    bold([`Total (${settlements.length})`, total(settlements, p.inTransit, inTransit)]);
  };
  bold([
    'Bank proof at the cut-off: the last statement against the ledger, what explains the difference, and what was unmatched',
  ]);
  for (const { document: d, status, sha256 } of withProof) {
    ws.addRow([]).commit();
    bold([
      `Month close ${d.period} · ${d.merchantAccount} ${d.currency} · ${status} · cut-off ${d.end} · a note needed above ${d.noteAbove ?? '0.00'}`,
    ]);
    ws.addRow([`  SHA-256 ${sha256}`]).commit();
    for (const p of d.bankProof ?? []) {
      ws.addRow([]).commit();
      bold([`Bank account ${p.bankAccount}${p.name ? ` · ${p.name}` : ''}`]);
      ws.addRow(['Statement', p.statement ? statementText(p.statement) : 'no statement']).commit();
      const closingRow = ws.addRow(['Statement closing balance', n(p.statementClosing)]);
      closingRow.commit();
      const ledgerRow = ws.addRow([`Ledger bank:${p.bankAccount}`, n(p.ledger)]);
      ledgerRow.commit();
      const difference =
        p.difference === null
          ? null
          : exact(p.difference, p.statementClosing, p.ledger)
            ? {
                formula: `B${closingRow.number}-B${ledgerRow.number}`,
                result: n(p.difference) as number,
              }
            : p.difference;
      const differenceRow = bold(['Difference', difference]);
      if (isExplained(p)) {
        writeExplained(p, differenceRow);
        continue;
      }
      ws.addRow([]).commit();
      bold(['Unmatched at the cut-off', 'Amount', 'Date', 'Age (days)', 'Note', 'Reference', 'Exception']);
      const range = items(p.unmatched);
      bold([`Total (${p.unmatched.length})`, total(p.unmatched, p.unmatchedTotal ?? null, range)]);
    }
  }
  ws.commit();
}
