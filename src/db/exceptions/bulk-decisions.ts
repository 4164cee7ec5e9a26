/**
 * Decisions in bulk, from the exception workbook uploaded back (the page and `POST
 * /api/v1/exceptions/decisions`): every filled row is checked (the exception exists, is still open, is
 * unchanged since the workbook was made, takes a decision, the decision is the uploader's to make, the
 * note is there when it is needed) and applied through the same decision functions as one decision on
 * the page (`decideIn`, `approveIn`, `rejectIn`), all in one transaction: any row refused, nothing is
 * decided, and the refusal names every row with the rules it broke.
 * An exception's version: `exceptionVersionSql` (./version.ts).
 */
import { sql, type Transaction } from 'kysely';
import { AppError } from '../../domain/errors.ts';
import { DECIDED_TYPES } from '../../domain/exception-rules.ts';
import {
  type DecisionRow,
  needsApprover,
  noteRule,
  problemLines,
  type RowProblem,
  type WorkbookDecision,
} from '../../domain/workbook-decisions.ts';
import type { Database, Db } from '../schema.ts';
import { withLedgerTransaction } from '../transaction.ts';
import { approveIn, decideIn, rejectIn } from './decisions.ts';
import { exceptionVersionSql } from './version.ts';

/** The refusal of an upload: every row that broke a rule, one line each; nothing was decided. */
export class BulkDecisionRefused extends AppError {
  readonly lines: string[];
  constructor(readonly problems: readonly RowProblem[]) {
    const lines = problemLines(problems);
    super(
      'VALIDATION_FAILED',
      `nothing decided: ${lines.length} row${lines.length === 1 ? '' : 's'} refused\n${lines.join('\n')}`,
    );
    this.lines = lines;
  }
}

export interface BulkDecisionInput {
  rows: readonly DecisionRow[];
  /** Problems found reading the file (a formula, a cell that is not text): the upload is refused too. */
  problems?: readonly RowProblem[];
  /** The signed-in user or the token's name. */
  by: string;
  /** A controller (or a token with `exceptions:approve`): may approve and reject proposals. */
  mayApprove: boolean;
  now?: Date;
}

export interface BulkDecisionOutcome {
  sheet: string;
  row: number;
  id: string;
  decision: WorkbookDecision;
  /** decided: resolved; proposed: waiting for a controller; approved: booked and resolved; rejected. */
  outcome: 'decided' | 'proposed' | 'approved' | 'rejected';
}

interface Current {
  id: string;
  type: string;
  state: string;
  version: string;
}

/**
 * Applies every row or none (see above). Throws `BulkDecisionRefused` naming each refused row, or
 * VALIDATION_FAILED when no row has a decision.
 */
export async function decideInBulk(db: Db, input: BulkDecisionInput): Promise<BulkDecisionOutcome[]> {
  if (input.rows.length === 0 && (input.problems ?? []).length === 0) {
    throw new AppError('VALIDATION_FAILED', 'no row has a decision: fill the Decision column first');
  }
  const now = input.now ?? new Date();
  return withLedgerTransaction(db, async (trx) => {
    const problems: RowProblem[] = [...(input.problems ?? [])];
    const refuse = (r: DecisionRow, rule: string) => problems.push({ sheet: r.sheet, row: r.row, rule });
    const ids = [...new Set(input.rows.map((r) => r.id))];
    const current = await lockAll(trx, ids);
    const first = new Map<string, DecisionRow>();
    const outcomes: BulkDecisionOutcome[] = [];
    for (const r of input.rows) {
      const seen = first.get(r.id);
      if (seen) {
        refuse(r, `exception ${r.id} is decided on ${seen.sheet} row ${seen.row} already`);
        continue;
      }
      first.set(r.id, r);
      const x = current.get(r.id);
      if (!x) {
        refuse(r, `exception ${r.id}: no such exception`);
        continue;
      }
      const before = problems.length;
      if (x.state === 'resolved') refuse(r, `exception ${r.id}: already resolved`);
      else if (x.version !== r.version) {
        refuse(r, `exception ${r.id} changed since the workbook was made: decide it from a new workbook`);
      }
      if (!(DECIDED_TYPES as readonly string[]).includes(x.type)) {
        refuse(r, `exception ${r.id} is ${x.type}: only ${DECIDED_TYPES.join(' and ')} take a decision`);
      }
      if (needsApprover(r.decision) && !input.mayApprove) {
        refuse(r, `${r.decision}: a controller approves or rejects a proposal`);
      }
      const why = noteRule(r.decision);
      if (why && r.note === '') refuse(r, `Note: required for ${r.decision} (${why})`);
      if (problems.length > before) continue;
      // Each row in a savepoint, so a refusal by the decision itself still lets the others be checked.
      await sql`SAVEPOINT bulk_decision`.execute(trx);
      try {
        outcomes.push({
          sheet: r.sheet,
          row: r.row,
          id: r.id,
          decision: r.decision,
          ...(await apply(trx, r)),
        });
        await sql`RELEASE SAVEPOINT bulk_decision`.execute(trx);
      } catch (err) {
        if (!(err instanceof AppError) || err.httpStatus >= 500) throw err;
        await sql`ROLLBACK TO SAVEPOINT bulk_decision`.execute(trx);
        refuse(r, err.message);
      }
    }
    if (problems.length > 0) throw new BulkDecisionRefused(problems);
    return outcomes;
  });

  async function apply(
    trx: Transaction<Database>,
    r: DecisionRow,
  ): Promise<{ outcome: BulkDecisionOutcome['outcome'] }> {
    const note = r.note;
    switch (r.decision) {
      case 'approve':
        await approveIn(trx, { id: r.id, by: input.by, ...(note ? { note } : {}), now });
        return { outcome: 'approved' };
      case 'reject':
        await rejectIn(trx, { id: r.id, by: input.by, note, now });
        return { outcome: 'rejected' };
      default: {
        const result = await decideIn(trx, { id: r.id, decision: r.decision, by: input.by, note, now });
        return { outcome: result.outcome };
      }
    }
  }
}

/** Locks the exceptions in id order (two uploads never deadlock) and reads what the checks need. */
async function lockAll(trx: Transaction<Database>, ids: readonly string[]): Promise<Map<string, Current>> {
  const valid = ids.filter((id) => /^\d{1,18}$/.test(id));
  if (valid.length === 0) return new Map();
  const { rows } = await sql<Current>`
    SELECT x.id::text AS id, x.type, x.state, ${exceptionVersionSql('x')} AS version
      FROM exceptions x WHERE x.id = ANY(${valid}::bigint[]) ORDER BY x.id FOR UPDATE`.execute(trx);
  return new Map(rows.map((r) => [r.id, r]));
}
