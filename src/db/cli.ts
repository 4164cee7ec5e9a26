/**
 * `payrecon db migrate | verify | rollback | snapshot` on the database the CLI chooses (`--url`, DATABASE_URL, the
 * running `payrecon up`'s, else the embedded PostgreSQL under `<data dir>/pg`; see src/endpoints.ts).
 * `verify` exits non-zero and names each failed invariant.
 */
import { localUser } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { takeBalanceSnapshots } from './balance-snapshots.ts';
import { createDb, migrateDown, migrateToLatest } from './connection.ts';
import { decideException } from './decisions.ts';
import { verifyLedger } from './verify.ts';

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
  by?: string;
}

/**
 * `payrecon exception decide <id> --accept-provider|--keep-ledger --note TEXT --by NAME`: an operator's
 * decision on an ILLEGAL_TRANSITION or FACTS_CHANGED (src/db/decisions.ts), printed as one line.
 */
export async function runDecideCli(id: string, opts: DecideOptions, open: OpenDatabase): Promise<void> {
  if (Boolean(opts.acceptProvider) === Boolean(opts.keepLedger)) {
    throw new AppError(
      'VALIDATION_FAILED',
      'exception decide: give exactly one of --accept-provider or --keep-ledger',
    );
  }
  const by = opts.by ?? localUser() ?? '';
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
      r.decision === 'accept-provider'
        ? `exception ${id} resolved: ${r.summary}, ${r.entriesBooked} entries booked\n`
        : `exception ${id} resolved: ${r.summary}\n`,
    );
  } finally {
    await db.destroy();
    await database.stop();
  }
}
