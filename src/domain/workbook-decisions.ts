/**
 * Decisions in bulk through the exception workbook: its Exceptions sheet carries a Decision column (a
 * list), a Note column and a hidden Key column (the exception's id and version when the workbook was
 * made). Uploaded back, each filled row is checked and all are applied or none. The rules of a row that
 * need no database are here; the version is read by src/db/exceptions/bulk-decisions.ts.
 */

/**
 * What a row may decide: keep the ledger's (resolved at once), propose accepting the provider's (booked
 * once a controller approves), and, on an exception with a proposal waiting, approve or reject it (a
 * controller's).
 */
export const WORKBOOK_DECISIONS = ['keep-ledger', 'accept-provider', 'approve', 'reject'] as const;
export type WorkbookDecision = (typeof WORKBOOK_DECISIONS)[number];

/** The Decision column's list on a row: what fits the exception as it stands. */
export function decisionChoices(proposalWaiting: boolean): readonly WorkbookDecision[] {
  return proposalWaiting ? ['approve', 'reject', 'keep-ledger'] : ['keep-ledger', 'accept-provider'];
}

/** The headers of the columns the upload reads. */
export const DECISION_HEADER = 'Decision';
export const NOTE_HEADER = 'Note';
export const KEY_HEADER = 'Key';

/** Why a decision needs its note, or null when the note is optional (an approval). */
export function noteRule(decision: WorkbookDecision): string | null {
  if (decision === 'approve') return null;
  return decision === 'reject' ? 'why the proposal is wrong' : 'why the decision is right';
}

/** Approving or rejecting a proposal re-books or drops what another proposed: a controller's. */
export function needsApprover(decision: WorkbookDecision): boolean {
  return decision === 'approve' || decision === 'reject';
}

/** The Key cell's text: `<id>@<version>` (the version: `<last audit event id>.<fact digest>`). */
export function exceptionKey(id: string, version: string): string {
  return `${id}@${version}`;
}

const KEY_RE = /^(\d{1,18})@(\d{1,19}\.[0-9a-f]{8})$/;

/** The id and version of a Key cell's text, or null when it is not one. */
export function parseExceptionKey(text: string): { id: string; version: string } | null {
  const m = KEY_RE.exec(text.trim());
  return m ? { id: m[1]!, version: m[2]! } : null;
}

/** One filled row of an uploaded workbook, as read. */
export interface DecisionRow {
  /** The sheet (`Exceptions`, or `Exceptions (2)` past a sheet's row limit) and its row number. */
  sheet: string;
  row: number;
  id: string;
  version: string;
  decision: WorkbookDecision;
  /** Trimmed; '' when empty. */
  note: string;
}

/** A rule a row broke. */
export interface RowProblem {
  sheet: string;
  row: number;
  rule: string;
}

/** One line per row, rows in order, every rule the row broke: `Exceptions row 7: ...; ...`. */
export function problemLines(problems: readonly RowProblem[]): string[] {
  const byRow = new Map<string, { sheet: string; row: number; rules: string[] }>();
  for (const p of problems) {
    const key = `${p.sheet}\u0000${p.row}`;
    const entry = byRow.get(key) ?? { sheet: p.sheet, row: p.row, rules: [] };
    if (!entry.rules.includes(p.rule)) entry.rules.push(p.rule);
    byRow.set(key, entry);
  }
  return [...byRow.values()]
    .sort((a, b) => (a.sheet === b.sheet ? a.row - b.row : a.sheet < b.sheet ? -1 : 1))
    .map((e) => `${e.sheet} row ${e.row}: ${e.rules.join('; ')}`);
}
