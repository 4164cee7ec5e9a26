/**
 * Named prepared statements for the ledger's hot statements. Kysely hands the `pg` driver every statement
 * as unnamed text, so the server parses, analyses and plans the big batch statements on every batch.
 * A statement wrapped in `prepared(...)` starts with `PREPARED_MARK`; the pool under Kysely (`namingPool`)
 * sends such a text as `{ name, text, values }`, its name derived from a hash of the whole text, so one
 * name always means one text and a changed text gets a new name. `pg` prepares a name once per
 * connection (Parse) and afterwards sends only Bind/Execute; the server keeps the statement for the
 * connection's life and replans it by itself when a migration changes a table it reads.
 *
 * Only statements whose text does not depend on the data may be wrapped (every value a parameter, the
 * same text for any batch size: arrays passed to `unnest`), so each connection holds a bounded set.
 * After five executions the server may use a generic plan; the wrapped statements reach every table
 * through per-key probes (LATERAL ... OFFSET 0, ctid), whose generic plan is the same (checked with
 * PREPARE + six EXPLAIN EXECUTE for `loadBatch` and the write's statements), so `plan_cache_mode` is left alone.
 */
import { createHash } from 'node:crypto';
import { type RawBuilder, sql } from 'kysely';
import type pg from 'pg';

/** The comment that opens a statement to be sent named (sent to the server once per connection). */
export const PREPARED_MARK = '/* prepared */ ';

/**
 * The comment that opens a statement to be sent named and whose rows come back as arrays of the column
 * values in select-list order (`pg`'s `rowMode: 'array'`) instead of objects keyed by column name.
 */
export const ARRAY_ROWS_MARK = '/* prepared, rows as arrays */ ';

/** The statement, sent as a named prepared statement (see the module's comment). */
export function prepared<T>(statement: RawBuilder<T>): RawBuilder<T> {
  return sql<T>`${sql.raw(PREPARED_MARK)}${statement}`;
}

/**
 * The statement, sent as a named prepared statement whose rows are arrays `T` (one element per column,
 * in select-list order): for big reads, where the driver's building of an object per row, one keyed
 * store per column, was the largest part of reading them.
 */
export function preparedArrays<T extends readonly unknown[]>(statement: RawBuilder<unknown>): RawBuilder<T> {
  return sql<T>`${sql.raw(ARRAY_ROWS_MARK)}${statement}`;
}

/** Names by text, so a batch's statement text is hashed once per process. */
const names = new Map<string, string>();
const NAMES_CAP = 512;

/**
 * The statement name of a text marked by `prepared` or `preparedArrays`, or null for any other text
 * (sent unnamed).
 */
export function statementName(text: string): string | null {
  if (!text.startsWith(PREPARED_MARK) && !text.startsWith(ARRAY_ROWS_MARK)) return null;
  let name = names.get(text);
  if (name === undefined) {
    name = `payrecon_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
    // A bound on memory should many texts ever be marked: forgetting a name only costs a hash.
    if (names.size >= NAMES_CAP) names.clear();
    names.set(text, name);
  }
  return name;
}

/** What Kysely's PostgresDialect uses of a pool and of its clients. */
interface PoolLike {
  connect(): Promise<ClientLike>;
  end(): Promise<void>;
}
interface ClientLike {
  // biome-ignore lint/suspicious/noExplicitAny: the driver's own overloads (text + values, or a cursor)
  query(...args: any[]): any;
  release(): void;
}

/** How Kysely opens a transaction (`begin`, or `start transaction` with an isolation level or access mode). */
const OPENING = /^(?:begin|start transaction)\b/;
/** Kysely's ends of a transaction. */
const CLOSING = new Set(['commit', 'rollback']);

/**
 * The pool as Kysely sees it: each client sends a text marked by `prepared` as a named statement and
 * anything else (other texts, cursors) unchanged. One wrapper per client, as Kysely keys its
 * connections by client. The pool's clients must be in `pg`'s pipeline mode (`createDb`'s are).
 *
 * A transaction's opening is sent with its first statement instead of on its own: Kysely awaits `begin`
 * before it runs the transaction's code, a round trip of its own, so the wrapper answers it at once and
 * writes it just ahead of the next statement (the pool's clients are in pipeline mode, see `createDb`),
 * whose answer then waits for the opening's. A transaction that sends nothing ends without a word to the
 * server. Should the opening fail, the statement behind it fails too: a plain `begin` fails only on a
 * session inside an aborted transaction block, where every statement fails, or on a lost connection.
 */
export function namingPool(pool: pg.Pool): PoolLike {
  const wrappers = new WeakMap<pg.PoolClient, ClientLike>();
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        // biome-ignore lint/suspicious/noExplicitAny: passed through to pg
        const send = (text: any, values?: any) => {
          const name = typeof text === 'string' ? statementName(text) : null;
          if (name !== null) {
            return text.startsWith(ARRAY_ROWS_MARK)
              ? client.query({ name, text, values, rowMode: 'array' })
              : client.query({ name, text, values });
          }
          return values === undefined ? client.query(text) : client.query(text, values);
        };
        /** The opening of the transaction in progress, while it is not sent yet. */
        let opening: string | null = null;
        wrapper = {
          // biome-ignore lint/suspicious/noExplicitAny: passed through to pg
          query(text: any, values?: any) {
            if (typeof text === 'string' && (values === undefined || values.length === 0)) {
              if (opening === null && OPENING.test(text)) {
                opening = text;
                return Promise.resolve({ command: 'BEGIN', rowCount: null, rows: [] });
              }
              if (opening !== null && CLOSING.has(text)) {
                opening = null;
                return Promise.resolve({ command: text.toUpperCase(), rowCount: null, rows: [] });
              }
            }
            if (opening === null) return send(text, values);
            const opened = client.query(opening);
            opening = null;
            const answer = send(text, values);
            if (typeof answer?.then !== 'function') {
              // A cursor: it reports its own failure (a failed opening fails it too).
              opened.catch(() => undefined);
              return answer;
            }
            return opened.then(
              () => answer,
              (err: unknown) => {
                answer.catch(() => undefined);
                throw err;
              },
            );
          },
          release() {
            opening = null;
            client.release();
          },
        };
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}
