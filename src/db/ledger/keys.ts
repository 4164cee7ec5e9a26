/**
 * How the ledger's statements name entities and carry rows: an entity's key (`refKey`, in `compareRefs`
 * order), and rows sent as one binary array per column (`rowsSource`, `refsSource`), so a statement
 * touches many entities whatever its size and its text does not depend on the data.
 */
import { sql } from 'kysely';
import type { EntityKind } from '../../domain/statuses.ts';
import { type BinaryColumn, binaryArray, binaryColumns } from './binary-array.ts';

export interface EntityRef {
  account: string;
  kind: EntityKind;
  entityId: string;
}

export function refKey(r: EntityRef): string {
  return `${r.account}\u0000${r.kind}\u0000${r.entityId}`;
}

export function compareRefs(a: EntityRef, b: EntityRef): number {
  return (
    compareText(a.account, b.account) || compareText(a.kind, b.kind) || compareText(a.entityId, b.entityId)
  );
}

export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The key columns of the rows, each as a binary text array (`binaryColumns`), in the rows' order. */
export function keyArrays<T>(rows: readonly T[], ...columns: ((row: T) => string | null)[]): Buffer[] {
  return binaryColumns(
    rows,
    columns.map((f) => ['text', f] as BinaryColumn<T>),
  );
}

/**
 * The refs' three key columns as binary text arrays (`keyArrays`): the server reads each element as its
 * bytes (`array_recv`) instead of parsing an array literal at Bind, and the client copies strings instead of
 * building literals.
 */
export function refArrays(refs: readonly EntityRef[]) {
  const [accounts, kinds, ids] = keyArrays(
    refs,
    (r) => r.account,
    (r) => r.kind,
    (r) => r.entityId,
  );
  return { accounts: accounts!, kinds: kinds!, ids: ids! };
}

/**
 * The refs as a row source, in the given order: `(SELECT unnest($1) AS account, unnest($2) AS kind,
 * unnest($3) AS id) AS r`, set-returning functions in a select list (a ProjectSet, in lockstep) rather
 * than `unnest($1, $2, $3)` in FROM, whose function scan stores each array's rows in a tuplestore before
 * reading them back (see `rowsSource`). It has no ordinal column: `WITH ORDINALITY` has no select-list
 * form, and `generate_series(1, $n)` is estimated at 1,000 rows in a generic plan (an `unnest` of a
 * parameter at 10), which once made a keyed check of `loadBatch` the hashed scan of the whole of `mirrors`.
 * Keyed reads join it to a table through `CROSS JOIN LATERAL (... WHERE <keyOf> ... OFFSET 0)`: the
 * OFFSET keeps the planner from flattening the subquery into a join, so every ref is one index probe
 * whatever the statistics say. (With missing or stale statistics, which is every table that has grown
 * since its last ANALYZE, a plain `IN (SELECT * FROM unnest(...))` became a hash join that scanned the
 * whole table once per batch: the cost of a batch grew with the ledger.)
 */
export function refsSource(refs: readonly EntityRef[]) {
  const a = refArrays(refs);
  return sql`(SELECT unnest(${a.accounts}::text[]) AS account, unnest(${a.kinds}::text[]) AS kind,
    unnest(${a.ids}::text[]) AS id) AS r`;
}

/**
 * 1 to `n`, the positions of a statement's rows, sent as one more array of its row source where the
 * statement needs them (instead of `WITH ORDINALITY` or `generate_series`, see `refsSource`). Kept
 * between calls: a new array only for a longer batch.
 */
let positionsKept: number[] = [];

export function positions(n: number): readonly number[] {
  if (positionsKept.length < n) positionsKept = Array.from({ length: n }, (_, i) => i + 1);
  return n === positionsKept.length ? positionsKept : positionsKept.slice(0, n);
}

/** `<alias>.merchant_account = r.account AND ...`: the key condition against `refsSource`. */
export function keyOf(alias: string) {
  return sql.raw(
    `${alias}.merchant_account = r.account AND ${alias}.entity_kind = r.kind AND ${alias}.entity_id = r.id`,
  );
}

/**
 * One column of a row source sent as a binary PostgreSQL array (`binaryColumns`): its element type and
 * each row's value (null for NULL).
 */
export type Column<T> = BinaryColumn<T>;

/**
 * The rows as `(SELECT unnest($1::type[]) AS column, ...) AS v`: one binary array parameter per column
 * (`binaryColumns`), so the server reads typed arrays instead of parsing a JSON document whose every
 * object repeats the column names, or array literals and each element's text. A column's trailing NULLs
 * are not sent: set-returning functions in a select list run in lockstep and pad the shorter ones with
 * NULLs, and the first column, sent whole, gives the number of rows (columns that are mostly or wholly
 * NULL, such as rejection codes and reasons, cost nothing). In the select list (a ProjectSet node, row by
 * row) rather than as `unnest($1, $2, ...) AS v(...)` in FROM: a function scan of several functions
 * first stores each function's rows in a tuplestore of its own, then reads them back into rows, which
 * took about four times the server's CPU (430 mirror rows, 33 columns of their types: 1.15 against 0.28 ms).
 */
export function rowsSource<T>(
  rows: readonly T[],
  columns: Readonly<Record<string, Column<T>>>,
  /** Adds the column `n`: the row's position in `rows`, from 1. */
  ordinality = false,
) {
  const names = Object.keys(columns);
  const list = names.map((name) => columns[name]!);
  const buffers = binaryColumns(rows, list);
  const items = list.map(
    ([type], i) => sql`unnest(${buffers[i]}::${sql.raw(type)}[]) AS ${sql.raw(names[i]!)}`,
  );
  // In lockstep with the columns, as long as the first column (sent whole): the positions, as an array
  // (`positions`, see `refsSource`: a `generate_series` of a parameter is estimated at 1,000 rows).
  if (ordinality) items.push(sql`unnest(${binaryArray('integer', positions(rows.length))}::int4[]) AS n`);
  return sql`(SELECT ${sql.join(items)}) AS v`;
}
