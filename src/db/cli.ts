/**
 * `payrecon db migrate | verify | rollback | snapshot` on the database the CLI chooses (`--url`, DATABASE_URL, the
 * running `payrecon up`'s, else the embedded PostgreSQL under `<data dir>/pg`; see src/endpoints.ts).
 * `verify` exits non-zero and names each failed invariant.
 */
import { loadConfig } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { EXCEPTION_STATES, type ExceptionState } from '../domain/exception-queue.ts';
import { EXCEPTION_TYPES, refusedReading } from '../domain/exception-rules.ts';
import { formatAmount } from '../domain/money.ts';
import { createDb, MIGRATIONS, migrateDown, migrateToLatest, pendingMigrations } from './connection.ts';
import { approveDecision, decideException, rejectDecision } from './exceptions/decisions.ts';
import { listQueue, type QueueFilter } from './exceptions/queue.ts';
import type { ExceptionFacts } from './exceptions/raise.ts';
import { takeBalanceSnapshots } from './ledger/balance-snapshots.ts';
import { verifyLedger } from './ledger/verify.ts';
import { merchantAccounts } from './read-models/reports.ts';

/** The command's database (chosen by the CLI: option, environment, running instance, embedded). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

export type DbAction = 'migrate' | 'verify' | 'rollback' | 'snapshot';

export interface DbCliOptions {
  /** `verify --since`: an ISO 8601 instant with offset, or a duration back from now (`24h`, `90m`, `7d`). */
  since?: string;
}

const SINCE_RULE =
  'must be an ISO 8601 instant with offset (2026-11-24T10:00:00Z) or a duration back from now: ' +
  'a whole number followed by s, m, h or d, e.g. 90m, 24h, 7d';
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** The latest instant `--since` accepts is now; the earliest, a hundred years back. */
const MAX_BACK_MS = 100 * 366 * 86_400_000;

/**
 * `--since` as an instant: `<n>s|m|h|d` back from `now`, or an ISO 8601 date-time with an offset (`Z` or
 * `+hh:mm`). Anything else, a calendar-invalid date, or an instant after `now` is a usage error naming
 * the flag and the rule.
 */
export function parseSince(text: string, now: Date = new Date()): Date {
  const fail = (rule: string) =>
    new AppError('VALIDATION_FAILED', `--since: ${rule} (got ${JSON.stringify(text)})`);
  const duration = /^(\d{1,9})(s|m|h|d)$/.exec(text.trim());
  let at: Date;
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2]!]!;
    if (ms > MAX_BACK_MS) throw fail('must be at most 100 years back');
    at = new Date(now.getTime() - ms);
  } else {
    const m =
      /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})$/i.exec(
        text.trim(),
      );
    if (!m) throw fail(SINCE_RULE);
    at = new Date(text.trim());
    // Date accepts 2026-02-30 (as March 2nd): the fields must survive the round trip in their own offset.
    const offsetMin = /z/i.test(m[8]!)
      ? 0
      : (m[8]![0] === '-' ? -1 : 1) * (Number(m[8]!.slice(1, 3)) * 60 + Number(m[8]!.slice(4, 6)));
    const local = new Date(at.getTime() + offsetMin * 60_000);
    const same =
      !Number.isNaN(at.getTime()) &&
      local.getUTCFullYear() === Number(m[1]) &&
      local.getUTCMonth() + 1 === Number(m[2]) &&
      local.getUTCDate() === Number(m[3]) &&
      local.getUTCHours() === Number(m[4]) &&
      local.getUTCMinutes() === Number(m[5]);
    if (!same) throw fail(`not a valid date and time: ${SINCE_RULE}`);
  }
  if (at.getTime() > now.getTime()) throw fail('must not be in the future');
  return at;
}

export async function runDbCli(
  action: DbAction,
  open: OpenDatabase,
  options: DbCliOptions = {},
): Promise<void> {
  // Arguments first: a bad one fails before any database is opened or started.
  const since = options.since === undefined ? null : parseSince(options.since);
  const database = await open();
  const db = createDb(database.url, 4);
  try {
    if (action === 'migrate') {
      const lines = await migrateToLatest(db);
      process.stdout.write(lines.length ? `${lines.join('\n')}\n` : 'database is up to date\n');
    } else if (action === 'rollback') {
      const pending = new Set(await pendingMigrations(db));
      const latest = Object.keys(MIGRATIONS)
        .filter((name) => !pending.has(name))
        .at(-1);
      const baseline = Object.keys(MIGRATIONS)[0];
      if (latest === baseline) {
        throw new AppError(
          'VALIDATION_FAILED',
          `db rollback: the latest migration is the baseline ${baseline}; reverting it would drop every table, so it is never rolled back`,
        );
      }
      const lines = await migrateDown(db);
      process.stdout.write(lines.length ? `${lines.join('\n')}\n` : 'nothing to roll back\n');
    } else if (action === 'snapshot') {
      const written = await takeBalanceSnapshots(db);
      process.stdout.write(`balance snapshots: ${written} written\n`);
    } else {
      const result = await verifyLedger(db, since === null ? {} : { since });
      const scope = since === null ? '' : ` since ${since.toISOString()}`;
      if (result.ok) {
        process.stdout.write(
          `ledger verified${scope}: ${result.entries} entries, ${result.entities} entities, all invariants hold\n`,
        );
      } else {
        process.stderr.write(`ledger verification${scope} failed (${result.failures.length}):\n`);
        for (const f of result.failures) process.stderr.write(`  - ${f}\n`);
        process.exitCode = 1;
      }
    }
  } finally {
    await db.destroy();
    await database.stop();
  }
}

export interface DecideOptions {
  acceptProvider?: boolean;
  keepLedger?: boolean;
  note?: string;
}

/**
 * `payrecon exception decide <id> --accept-provider|--keep-ledger --note TEXT --user NAME`: a decision
 * on an ILLEGAL_TRANSITION or FACTS_CHANGED (src/db/exceptions/decisions.ts), printed as one line:
 * keeping the ledger's resolves it; accepting the provider's is proposed for a controller to approve.
 * `actingUser` authenticates who decides (the CLI's), after the arguments are checked.
 */
export async function runDecideCli(
  id: string,
  opts: DecideOptions,
  actingUser: () => Promise<string>,
  open: OpenDatabase,
): Promise<void> {
  if (Boolean(opts.acceptProvider) === Boolean(opts.keepLedger)) {
    throw new AppError(
      'VALIDATION_FAILED',
      'exception decide: give exactly one of --accept-provider or --keep-ledger',
    );
  }
  const by = await actingUser();
  const database = await open();
  const db = createDb(database.url, 2);
  try {
    const r = await decideException(db, {
      id,
      decision: opts.acceptProvider ? 'accept-provider' : 'keep-ledger',
      by,
      note: opts.note ?? '',
    });
    process.stdout.write(
      r.outcome === 'proposed'
        ? `exception ${id} ${r.summary}; nothing booked until a controller who did not propose it approves (payrecon exception approve ${id})\n`
        : `exception ${id} resolved: ${r.summary}\n`,
    );
  } finally {
    await db.destroy();
    await database.stop();
  }
}

/**
 * `payrecon exception approve|reject <id> [--note TEXT] --user NAME`: a controller answers the decision
 * proposed on an exception: approved, the ledger books it (never by its proposer); rejected, nothing is
 * booked.
 */
export async function runApprovalCli(
  action: 'approve' | 'reject',
  id: string,
  opts: { note?: string },
  actingUser: () => Promise<string>,
  open: OpenDatabase,
): Promise<void> {
  if (action === 'reject' && !opts.note?.trim()) {
    throw new AppError('VALIDATION_FAILED', '--note: required to reject (why the proposal is wrong)');
  }
  const by = await actingUser();
  const database = await open();
  const db = createDb(database.url, 2);
  try {
    const input = { id, by, ...(opts.note !== undefined ? { note: opts.note } : {}) };
    if (action === 'approve') {
      const r = await approveDecision(db, input);
      process.stdout.write(`exception ${id} resolved: ${r.summary}, ${r.entriesBooked} entries booked\n`);
    } else {
      const p = await rejectDecision(db, input);
      process.stdout.write(`exception ${id}: ${p.by}'s proposal rejected, nothing booked\n`);
    }
  } finally {
    await db.destroy();
    await database.stop();
  }
}

export interface ExceptionListOptions {
  type?: string;
  state?: string;
  account?: string;
  limit?: string;
}

/**
 * `payrecon exception list [--type T] [--state S] [--account A] [--limit N]`: the exception queue as the page
 * lists it (oldest first; default every state but resolved), one line each: id, type, severity, state,
 * entity, amount, the provider's status and reason, and what the provider said that was not applied (an
 * ILLEGAL_TRANSITION's move, a FACTS_CHANGED's changes) or the rule; the id is what `exception decide` takes.
 */
export async function runExceptionListCli(opts: ExceptionListOptions, open: OpenDatabase): Promise<void> {
  const filter: QueueFilter = {};
  if (opts.type !== undefined) {
    if (!(EXCEPTION_TYPES as readonly string[]).includes(opts.type)) {
      throw new AppError(
        'VALIDATION_FAILED',
        `--type: no exception type ${opts.type} (known: ${EXCEPTION_TYPES.join(', ')})`,
      );
    }
    filter.type = opts.type;
  }
  if (opts.account !== undefined) filter.merchantAccount = opts.account;
  if (opts.state !== undefined) {
    if (!(EXCEPTION_STATES as readonly string[]).includes(opts.state)) {
      throw new AppError('VALIDATION_FAILED', `--state: must be one of ${EXCEPTION_STATES.join(', ')}`);
    }
    filter.state = opts.state as ExceptionState;
  }
  const limit = opts.limit === undefined ? 100 : Number(opts.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) {
    throw new AppError('VALIDATION_FAILED', '--limit: must be an integer from 1 to 10000');
  }
  const sla = loadConfig().exceptions.sla;
  const database = await open();
  const db = createDb(database.url, 2);
  try {
    if (opts.account !== undefined) {
      const known = await merchantAccounts(db);
      if (!known.includes(opts.account)) {
        throw new AppError(
          'VALIDATION_FAILED',
          `--account: no merchant account ${opts.account} in the ledger (${known.length ? `known: ${known.join(', ')}` : 'it has none yet'})`,
        );
      }
    }
    const rows = await listQueue(db, filter, new Date(), sla, limit + 1, null);
    for (const x of rows.slice(0, limit)) {
      const f = (x.details?.facts ?? null) as ExceptionFacts | null;
      const reason = [f?.statusReason, f?.rejectionCode, f?.rejectionReason].filter(Boolean).join(' ');
      const status = f?.status ? `${f.status}${reason ? ` (${reason})` : ''}` : 'no status';
      const amount = x.amount === null ? 'no amount' : `${formatAmount(x.amount)} ${x.currency ?? ''}`.trim();
      const said = refusedReading(x.type, x.details);
      process.stdout.write(
        `${[
          x.id,
          x.type,
          x.severity,
          x.state,
          `${x.kind} ${x.merchantAccount}/${x.entityId}`,
          amount,
          status,
          said ? `provider said ${said}` : (f?.rule ?? ''),
        ].join('  ')}\n`,
      );
    }
    const more = rows.length > limit ? ` (more: raise --limit)` : '';
    process.stdout.write(
      `${Math.min(rows.length, limit)} exception(s), ${filter.state ?? 'not resolved'}${more}\n`,
    );
  } finally {
    await db.destroy();
    await database.stop();
  }
}
