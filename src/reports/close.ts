/**
 * The month close from the command line (`payrecon close prepare|approve|show`) and the close scope of a
 * month, shared with the page and the API: a month of one merchant account and currency, read in the
 * report time zone and cut-off like the settlement workbook's periods.
 */
import type { OpenDatabase } from '../db/cli.ts';
import type { BankProofSettings } from '../db/closes/bank-proof.ts';
import { type CloseScope, closeDocument, postCloseAdjustments } from '../db/closes/document.ts';
import { type CloseRecord, getCloseRecord } from '../db/closes/records.ts';
import { closeLedgerOf } from '../db/closes/scopes.ts';
import { approveClose, prepareClose } from '../db/closes/service.ts';
import { createDb } from '../db/connection.ts';
import { CLOSE_PERIOD_RE, type CloseDocument } from '../domain/close.ts';
import { AppError } from '../domain/errors.ts';
import { monthOfInstant, monthPeriod } from './period.ts';

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

/** The bank proof as the terminal prints it: a line per bank account, then one per unmatched item. */
export function bankProofLines(doc: CloseDocument): string[] {
  return (doc.bankProof ?? []).flatMap((p) => [
    `bank ${p.bankAccount}: statement ${p.statement ? `${p.statement.statementId ?? `import ${p.statement.importId}`} of ${p.statement.date} closing ${p.statementClosing ?? 'without a balance'}` : 'none'}; ledger bank:${p.bankAccount} ${p.ledger}; difference ${p.difference ?? 'n/a'}; unmatched ${p.unmatched.length} (${p.unmatchedTotal})`,
    ...p.unmatched.map(
      (u) =>
        `    ${u.kind} ${u.id} ${u.amount} of ${u.date}, ${u.ageDays} day${u.ageDays === 1 ? '' : 's'}: ${u.noted ? 'noted' : 'no note'}${u.exceptionId ? ` (exception ${u.exceptionId})` : ''}`,
    ),
  ]);
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
