/**
 * The month close's two signatures, each in its own transaction: the preparer's (figures computed over
 * one snapshot of the ledger, stored with their hash) and the approver's (the row locked, the hash checked).
 */
import { sql } from 'kysely';
import {
  type CloseDocument,
  canonicalJson,
  itemsNeedingNote,
  needsNoteMessage,
  sha256Hex,
} from '../../domain/close.ts';
import { AppError } from '../../domain/errors.ts';
import { formatAmount, type Minor, parseLedgerMinor } from '../../domain/money.ts';
import type { Db } from '../schema.ts';
import { notedNow } from './bank-proof.ts';
import { type CloseScope, closeDocument } from './document.ts';
import { type CloseRecord, getCloseRecord, verifyClose } from './records.ts';
import { closeLedgerOf } from './scopes.ts';

const iso = (d: Date): string => d.toISOString();

/**
 * Prepares and signs a close: computes the figures, refuses a period not over yet or a proof that is
 * not zero, and stores the canonical text with its SHA-256. One close per account, currency and month.
 */
export async function prepareClose(db: Db, s: CloseScope, by: string, now: Date): Promise<CloseRecord> {
  if (s.end.getTime() > now.getTime()) {
    throw new AppError('CONFLICT', `${s.period} is not over yet: it can be closed from ${iso(s.end)}`);
  }
  const ledger = await closeLedgerOf(db, s.merchantAccount, s.currency);
  const first = ledger.firstPostingAt;
  if (first === null || first.getTime() >= s.end.getTime()) {
    throw new AppError(
      'CONFLICT',
      `${s.merchantAccount} ${s.currency} has no entries ${first === null ? 'yet' : `before ${s.monthOf(first)}`}: ${s.period} has no figures to sign`,
    );
  }
  const existing = await getCloseRecord(db, s.merchantAccount, s.currency, s.period);
  if (existing) {
    throw new AppError(
      'CONFLICT',
      `${s.period} of ${s.merchantAccount} ${s.currency} is already signed by ${existing.preparedBy}`,
    );
  }
  const document = await db.transaction().execute(async (trx) => {
    // One snapshot of the ledger for every figure, so the proof is computed over one state.
    await sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.execute(trx);
    return closeDocument(trx, s);
  });
  if (parseLedgerMinor(document.proof) !== 0n) {
    throw new AppError(
      'CONFLICT',
      `the proof of ${s.period} is not zero (${document.proof}): opening + movements - closing must be 0 on every account`,
    );
  }
  const waiting = itemsNeedingNote(document.bankProof ?? [], s.bank?.noteAbove ?? 0n, parseLedgerMinor);
  if (waiting.length > 0) {
    throw new AppError('CONFLICT', needsNoteMessage(waiting, formatAmount(s.bank?.noteAbove ?? 0n)));
  }
  const canonical = canonicalJson(document);
  const inserted = await db
    .insertInto('closes')
    .values({
      merchant_account: s.merchantAccount,
      currency: s.currency,
      period: s.period,
      status: 'prepared',
      prepared_by: by,
      prepared_at: now,
      figures: sql<Record<string, unknown>>`${canonical}::jsonb`,
      canonical,
      sha256: sha256Hex(canonical),
      period_start: s.start,
      period_end: s.end,
      time_zone: s.timeZone,
    })
    .onConflict((oc) => oc.constraint('closes_period_uq').doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!inserted) {
    throw new AppError(
      'CONFLICT',
      `${s.period} of ${s.merchantAccount} ${s.currency} was just signed by someone else`,
    );
  }
  const record = await getCloseRecord(db, s.merchantAccount, s.currency, s.period);
  if (!record) throw new AppError('INTERNAL', 'close vanished after insert');
  return record;
}

/**
 * The signed bank proof's unmatched items above `noteAbove` whose exception has no note now (a note
 * added after preparing counts): what refuses approval.
 */
async function unnotedAtApproval(db: Db, document: CloseDocument, noteAbove: Minor) {
  const above = itemsNeedingNote(
    (document.bankProof ?? []).map((p) => ({
      ...p,
      unmatched: p.unmatched.map((u) => ({ ...u, noted: false })),
    })),
    noteAbove,
    parseLedgerMinor,
  );
  const noted = await notedNow(db, above);
  return above.filter((i) => !noted.has(`${i.kind}|${i.id}`));
}

/**
 * Approves a prepared close. The preparer cannot approve their own close (403, and the database's
 * CHECK `closes_approver_ck` refuses it too); a close whose stored hash no longer matches is refused.
 */
export async function approveClose(
  db: Db,
  key: { merchantAccount: string; currency: string; period: string },
  by: string,
  now: Date,
  /** The amount above which an unmatched item of the signed bank proof needs a note (default 0.00). */
  noteAbove: Minor = 0n,
): Promise<CloseRecord> {
  const { merchantAccount, currency, period } = key;
  await closeLedgerOf(db, merchantAccount, currency);
  await db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('closes')
      .select(['id', 'status', 'prepared_by', 'approved_by', 'canonical', 'sha256', 'figures'])
      .where('merchant_account', '=', merchantAccount)
      .where('currency', '=', currency)
      .where('period', '=', period)
      .forUpdate()
      .executeTakeFirst();
    if (!row)
      throw new AppError('NOT_FOUND', `${period} of ${merchantAccount} ${currency} is not prepared yet`);
    if (row.status === 'approved') {
      throw new AppError(
        'CONFLICT',
        `${period} of ${merchantAccount} ${currency} is already approved by ${row.approved_by}`,
      );
    }
    if (row.prepared_by === by) {
      throw new AppError(
        'FORBIDDEN',
        `You prepared and signed ${period} of ${merchantAccount} ${currency}, so a different controller must approve it.`,
      );
    }
    if (!verifyClose({ canonical: row.canonical ?? '', sha256: row.sha256 ?? '', figures: row.figures })) {
      throw new AppError(
        'CONFLICT',
        `the stored figures of ${period} no longer match their SHA-256; not approved`,
      );
    }
    const waiting = await unnotedAtApproval(
      trx,
      JSON.parse(row.canonical ?? '{}') as CloseDocument,
      noteAbove,
    );
    if (waiting.length > 0)
      throw new AppError('CONFLICT', needsNoteMessage(waiting, formatAmount(noteAbove)));
    await trx
      .updateTable('closes')
      .set({ status: 'approved', approved_by: by, approved_at: now })
      .where('id', '=', row.id)
      .execute();
  });
  const record = await getCloseRecord(db, merchantAccount, currency, period);
  if (!record) throw new AppError('INTERNAL', 'close vanished after approval');
  return record;
}
