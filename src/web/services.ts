/**
 * The page's services over the ledger database's repositories (src/db) and the report runner; no SQL
 * here. The only writes are the exception queue's (src/db/exception-queue.ts), an ILLEGAL_TRANSITION's or FACTS_CHANGED's
 * decision (src/db/decisions.ts), and the page's sessions and failed sign-ins (src/db/web-sessions.ts).
 */

import { approveDecision, decideException, rejectDecision } from '../db/exceptions/decisions.ts';
import { getQueueItem, listQueue, queueAgeCounts } from '../db/exceptions/queue.ts';
import { bulkChangeState, changeQueueItem } from '../db/exceptions/queue-service.ts';
import { exceptionTypes } from '../db/exceptions/raise.ts';
import { getPayment, lookupPayments, paidAmounts } from '../db/read-models/payments.ts';
import type { ReconciliationBankAccount } from '../db/read-models/reconciliation.ts';
import type { Db } from '../db/schema.ts';
import {
  clearSignInFailures,
  endWebSession,
  findWebSession,
  forgetSignInAttempts,
  insertWebSession,
  pruneSignInFailures,
  pruneWebSessions,
  recordSignInAttempt,
  touchWebSession,
} from '../db/web-sessions.ts';
import { MOVE_FROM } from '../domain/exception-queue.ts';
import { DEFAULT_SLA_TABLE, type SlaTable } from '../domain/exception-sla.ts';
import type { Minor } from '../domain/money.ts';
import { decideFromWorkbook } from '../reports/decision-workbook.ts';
import { queueCsv } from '../reports/exception-csv.ts';
import type { ReportRun, ReportRunner } from '../reports/runs.ts';
import type { WebServices } from './app.ts';
import { ledgerBalanceServices } from './balance-services.ts';
import { ledgerCloseServices } from './close-services.ts';
import { ledgerReconciliationServices } from './reconciliation-services.ts';
import type { BankFeed } from './reconciliation-views.ts';
import type { ReportRunView } from './views.ts';

function runView(run: ReportRun): ReportRunView {
  return {
    id: run.id,
    kind: run.kind,
    account: run.account,
    from: run.from,
    to: run.to,
    status: run.status,
    progress: run.progress,
    rowCounts: run.rowCounts,
    sha256: run.sha256,
    files: run.files.map((f) => ({ name: f.name, label: f.label })),
    requestedBy: run.requestedBy,
    trigger: run.trigger,
    createdAt: run.createdAt,
    finishedAt: run.finishedAt,
    error: run.error ?? (run.deleted ? 'Files removed by retention.' : null),
  };
}

/**
 * `sla`: the exception queue's service levels (config.exceptions.sla); `bankAccounts`: the configured
 * bank accounts the Reconciliation pages show (config.bankAccounts).
 */
/** The bank accounts the Reconciliation pages and the close's bank proof read. */
export interface BankSettings {
  /** Read at each use: configured (PAYRECON_BANK_ACCOUNTS), or the embedded sandbox's. */
  accounts: () => readonly ReconciliationBankAccount[];
  /** Unmatched items above this need a note before a close is signed (default 0.00: every one). */
  noteAbove?: Minor;
  /** Where the bank accounts and statements come from, for the Reconciliation list. */
  feed?: () => Promise<BankFeed>;
}

export function ledgerWebServices(
  db: Db,
  reports: ReportRunner,
  sla: SlaTable = DEFAULT_SLA_TABLE,
  /** The bank accounts (none: no Reconciliation days, no bank proof in closes). */
  bank?: BankSettings,
): WebServices {
  return {
    payments: {
      lookup: (id) => lookupPayments(db, id),
      get: (account, kind, entityId) => getPayment(db, account, kind, entityId),
    },
    reports: {
      list: async (limit) => (await reports.list(limit)).map(runView),
      get: async (id) => {
        const run = await reports.get(id);
        return run ? runView(run) : null;
      },
      start: async (params) => {
        const started = await reports.start(
          { kind: params.kind, from: params.from, to: params.to, account: params.account },
          { trigger: 'demand', requestedBy: params.requestedBy },
        );
        if (!started) throw new Error('report run key collision');
        // The page follows progress from the database; a failure is recorded on the run.
        started.done.catch(() => undefined);
        return started.id;
      },
      filePath: (id, name) => reports.filePath(id, name),
      accounts: () => reports.accounts(),
    },

    closes: ledgerCloseServices(
      db,
      reports.timeZone,
      reports.cutoff,
      bank && {
        get accounts() {
          return bank.accounts();
        },
        noteAbove: bank.noteAbove ?? 0n,
      },
    ),
    reconciliation: ledgerReconciliationServices(
      db,
      bank?.accounts ?? (() => []),
      reports.timeZone,
      bank?.feed,
    ),
    exceptions: {
      list: (filter, now, limit, afterId) => listQueue(db, filter, now, sla, limit, afterId),
      ageCounts: (filter, now) => queueAgeCounts(db, filter, now, sla),
      get: (id, now) => getQueueItem(db, id, now, sla),
      types: () => exceptionTypes(db),
      accounts: () => reports.accounts(),
      change: (id, change, username, now) => changeQueueItem(db, id, change, username, now),
      // An ILLEGAL_TRANSITION or FACTS_CHANGED is resolved by a decision (accept or keep), never by a plain
      // bulk resolve (bulkChangeState leaves them unchanged).
      bulk: (ids, state, note, username, now) =>
        bulkChangeState(
          db,
          ids,
          {
            kind: 'state',
            state,
            note,
            ...(state === 'acknowledged' ? { from: MOVE_FROM.acknowledged } : {}),
          },
          username,
          now,
        ),
      csv: async (filter, now) => queueCsv(await listQueue(db, filter, now, sla, 100_000, null), now),
      paid: (rows) =>
        paidAmounts(
          db,
          rows.filter((r) => r.type === 'PROVIDER_AMOUNT_MISMATCH'),
        ),
      decide: async (id, decision, note, username, now) =>
        (await decideException(db, { id, decision, note, by: username, now })).outcome,
      approve: async (id, note, username, now) => {
        await approveDecision(db, { id, by: username, ...(note ? { note } : {}), now });
      },
      reject: async (id, note, username, now) => {
        await rejectDecision(db, { id, by: username, note, now });
      },
      decideWorkbook: (bytes, username, mayApprove, now) =>
        decideFromWorkbook(db, bytes, { by: username, mayApprove, now }),
    },

    balances: ledgerBalanceServices(db),

    sessions: {
      insert: (session) => insertWebSession(db, session),
      find: (id) => findWebSession(db, id),
      end: (id, at, reason) => endWebSession(db, id, at, reason),
      touch: (id, at) => touchWebSession(db, id, at),
      prune: (before) => pruneWebSessions(db, before),
      recordAttempt: (subjects, at, since) => recordSignInAttempt(db, subjects, at, since),
      forgetAttempts: (ids) => forgetSignInAttempts(db, ids),
      clearFailures: (subject) => clearSignInFailures(db, subject),
      pruneFailures: (before) => pruneSignInFailures(db, before),
    },
  };
}
