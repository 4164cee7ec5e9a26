/**
 * Backfill: `payrecon backfill intents --csv FILE` imports the merchant's creation records from a CSV
 * file, and `payrecon backfill poll --from DATE --to DATE [--account NAME]` reads the status of every
 * entity first seen in a range again (observations with source `backfill`).
 *
 * Intents CSV: a header row, then one intent per row; comma-separated, RFC 4180 quoting, UTF-8. Columns
 * (any order; unknown columns are an error, empty cells mean "not given"):
 *
 * | column | required | rule |
 * |---|---|---|
 * | operation | yes | deposit, card_deposit, cashout or refund |
 * | account | yes | the provider account name of the configuration |
 * | external_ref | yes | invoice_id (deposits), external_id (cashouts), the merchant's refund reference |
 * | currency | yes | ISO 4217, e.g. BRL |
 * | amount | yes | decimal text with at most 2 decimals, e.g. 100.50 |
 * | entity_id | when outcome is created | the provider id (deposit_id, cashout_id, refund_id) |
 * | parent_deposit_id | refunds | the deposit refunded |
 * | outcome | no (created) | created, declined or unknown |
 * | created_at | no (import time) | ISO 8601, e.g. 2026-11-21T10:00:00Z |
 * | expected_fee | no | decimal text |
 * | test, crypto, fee_on_payer | no (false) | true/false or 1/0 |
 * | intent_id | no | a stable id; default `<account>:<operation>:<external_ref>`, so importing twice is a no-op |
 *
 * Every row is checked before anything is published: one bad row and nothing goes out; each error names
 * the line (the header is line 1), the column and the rule.
 */
import { parse } from 'csv-parse/sync';
import { createDb } from '../db/connection.ts';
import { entitiesFirstSeenBetween } from '../db/polling/schedule.ts';
import type { Db } from '../db/schema.ts';
import { mapBounded } from '../domain/concurrency.ts';
import { AppError } from '../domain/errors.ts';
import type { Intent, Observation } from '../domain/observation.ts';
import type { Publisher } from '../events/kafka.ts';
import { INTENT_TOPIC, OBSERVATION_TOPIC } from '../events/topics.ts';
import { type Logger, logger as rootLogger } from '../logger.ts';
import { clientsFor } from '../provider/client.ts';
import { formatZodIssues } from '../provider/schemas.ts';
import type { StatusReader } from '../provider/to-observation.ts';
import { readStatus } from '../provider/to-observation.ts';
import { runningSandboxAccounts } from '../sandbox/traffic-client.ts';
import { type ConnectPublisher, runCliAction } from './connect.ts';
import { intentFromInput, intentInputSchema } from './intent/input.ts';

/** CSV column -> field of `intentInputSchema`. */
export const INTENT_CSV_COLUMNS = {
  intent_id: 'intentId',
  operation: 'operation',
  account: 'account',
  external_ref: 'externalRef',
  entity_id: 'entityId',
  currency: 'currency',
  amount: 'amount',
  expected_fee: 'expectedFee',
  test: 'test',
  crypto: 'crypto',
  fee_on_payer: 'feeOnPayer',
  parent_deposit_id: 'parentDepositId',
  outcome: 'outcome',
  created_at: 'createdAt',
} as const;

const REQUIRED_COLUMNS = ['operation', 'account', 'external_ref', 'currency', 'amount'] as const;
const FIELD_TO_COLUMN = Object.fromEntries(
  Object.entries(INTENT_CSV_COLUMNS).map(([c, f]) => [f, c]),
) as Record<string, string>;

export interface CsvIssue {
  line: number;
  column: string;
  rule: string;
}

export function csvIssueText(i: CsvIssue): string {
  return `line ${i.line}, column ${i.column}: ${i.rule}`;
}

/**
 * Parses and validates an intents CSV. Answers every intent, or every issue (line, column, rule) and no
 * intent at all. `accounts`: configured account names (others are refused).
 */
export function parseIntentsCsv(
  text: string,
  accounts?: readonly string[],
  now: Date = new Date(),
): { ok: true; intents: Intent[] } | { ok: false; issues: CsvIssue[] } {
  let rows: { record: string[]; info: { lines: number } }[];
  try {
    rows = parse(text, {
      bom: true,
      info: true,
      relax_column_count: false,
      skip_empty_lines: true,
    }) as unknown as {
      record: string[];
      info: { lines: number };
    }[];
  } catch (err) {
    const e = err as { lines?: number; message?: string };
    return {
      ok: false,
      issues: [
        { line: e.lines ?? 1, column: '-', rule: `must be valid CSV (${e.message ?? 'parse error'})` },
      ],
    };
  }
  if (rows.length === 0)
    return { ok: false, issues: [{ line: 1, column: '-', rule: 'must have a header row' }] };
  const header = rows[0]!.record.map((h) => h.trim().toLowerCase());
  const issues: CsvIssue[] = [];
  header.forEach((h) => {
    if (!(h in INTENT_CSV_COLUMNS)) {
      issues.push({
        line: 1,
        column: h || '(empty)',
        rule: `is not a known column (${Object.keys(INTENT_CSV_COLUMNS).join(', ')})`,
      });
    }
  });
  for (const c of REQUIRED_COLUMNS) {
    if (!header.includes(c)) issues.push({ line: 1, column: c, rule: 'is a required column' });
  }
  if (new Set(header).size !== header.length)
    issues.push({ line: 1, column: '-', rule: 'columns must not repeat' });
  if (issues.length > 0) return { ok: false, issues };
  if (rows.length === 1)
    return { ok: false, issues: [{ line: 2, column: '-', rule: 'must hold at least one intent row' }] };

  const intents: Intent[] = [];
  const seen = new Map<string, number>();
  for (const { record, info } of rows.slice(1)) {
    const line = info.lines;
    const input: Record<string, unknown> = {};
    header.forEach((h, i) => {
      const v = (record[i] ?? '').trim();
      if (v !== '') input[INTENT_CSV_COLUMNS[h as keyof typeof INTENT_CSV_COLUMNS]] = v;
    });
    const result = intentInputSchema.safeParse(input);
    if (!result.success) {
      for (const i of formatZodIssues(result.error)) {
        issues.push({ line, column: FIELD_TO_COLUMN[i.field.split('.')[0]!] ?? i.field, rule: i.rule });
      }
      continue;
    }
    if (accounts && !accounts.includes(result.data.account)) {
      issues.push({ line, column: 'account', rule: 'must name a configured provider account' });
      continue;
    }
    const intent = intentFromInput(result.data, now);
    const earlier = seen.get(intent.intentId);
    if (earlier !== undefined) {
      issues.push({
        line,
        column: 'intent_id',
        rule: `must be unique in the file (line ${earlier} has the same)`,
      });
      continue;
    }
    seen.set(intent.intentId, line);
    intents.push(intent);
  }
  return issues.length > 0 ? { ok: false, issues } : { ok: true, intents };
}

/** Publishes intents in acknowledged chunks. */
export async function publishIntents(
  publisher: Pick<Publisher, 'publish'>,
  intents: readonly Intent[],
  chunk = 500,
) {
  for (let i = 0; i < intents.length; i += chunk) {
    await publisher.publish(
      INTENT_TOPIC,
      intents.slice(i, i + chunk).map((value) => ({ value })),
    );
  }
}

/** `payrecon backfill intents --csv FILE`. */
export async function runBackfillIntentsCli(opts: { csv: string }, connect: ConnectPublisher): Promise<void> {
  await runCliAction(async () => {
    const { readFileSync } = await import('node:fs');
    let text: string;
    try {
      text = readFileSync(opts.csv, 'utf8');
    } catch (err) {
      throw new AppError(
        'VALIDATION_FAILED',
        `${opts.csv}: cannot be read (${(err as NodeJS.ErrnoException).code})`,
      );
    }
    const connected = await connect('backfill');
    try {
      const names = connected.config.accounts.map((a) => a.name);
      const parsed = parseIntentsCsv(text, names.length > 0 ? names : undefined);
      if (!parsed.ok) {
        for (const i of parsed.issues.slice(0, 50)) process.stderr.write(`${opts.csv}: ${csvIssueText(i)}\n`);
        if (parsed.issues.length > 50) process.stderr.write(`... and ${parsed.issues.length - 50} more\n`);
        throw new AppError(
          'VALIDATION_FAILED',
          `${opts.csv}: ${parsed.issues.length} problem(s); nothing was published`,
        );
      }
      await publishIntents(connected.publisher, parsed.intents);
      process.stdout.write(`published ${parsed.intents.length} intent(s) from ${opts.csv}\n`);
    } finally {
      await connected.close();
    }
  });
}

// ---------------------------------------------------------------- re-polling a range

export interface BackfillPollDeps {
  db: Db;
  clientFor(account: string): StatusReader | undefined;
  publisher: Pick<Publisher, 'publish'>;
  concurrency?: number;
  /** Observations per publish (default 200). */
  chunk?: number;
  logger?: Logger;
}

export interface BackfillPollResult {
  entities: number;
  published: number;
  failed: number;
}

/** Reads every entity first seen in the range again and publishes observations with source `backfill`. */
export async function backfillPoll(
  deps: BackfillPollDeps,
  range: { from: Date; to: Date; account?: string },
): Promise<BackfillPollResult> {
  const log = (deps.logger ?? rootLogger).child({ module: 'backfill' });
  const entities = await entitiesFirstSeenBetween(deps.db, range.from, range.to, range.account);
  const chunk = deps.chunk ?? 200;
  let published = 0;
  let failed = 0;
  for (let i = 0; i < entities.length; i += chunk) {
    const part = entities.slice(i, i + chunk);
    const read = await mapBounded(part, deps.concurrency ?? 8, async (e): Promise<Observation | null> => {
      const client = deps.clientFor(e.account);
      try {
        if (!client) throw new AppError('NOT_FOUND', `account ${e.account} is not configured`);
        return await readStatus(client, e, 'backfill');
      } catch (err) {
        log.warn({ err, kind: e.kind, entityId: e.entityId, account: e.account }, 'backfill read failed');
        return null;
      }
    });
    const observations = read.filter((o): o is Observation => o !== null);
    failed += read.length - observations.length;
    await deps.publisher.publish(
      OBSERVATION_TOPIC,
      observations.map((value) => ({ value })),
    );
    published += observations.length;
  }
  return { entities: entities.length, published, failed };
}

/**
 * A `--from`/`--to` value: `YYYY-MM-DD` (UTC midnight; as `--to` the whole day is included) or an ISO
 * 8601 date-time.
 */
export function parseRangeDate(text: string, option: string, end: boolean): Date {
  if (/^\d{4}-\d{2}-\d{2}$/.test(text)) {
    const d = new Date(`${text}T00:00:00Z`);
    if (!Number.isNaN(d.getTime()) && d.toISOString().startsWith(text)) {
      return end ? new Date(d.getTime() + 86_400_000) : d;
    }
  } else if (/^\d{4}-\d{2}-\d{2}T/.test(text)) {
    const d = new Date(text);
    if (!Number.isNaN(d.getTime())) return d;
  }
  throw new AppError('VALIDATION_FAILED', `${option}: must be a date YYYY-MM-DD or an ISO 8601 date-time`);
}

/** `payrecon backfill poll --from DATE --to DATE [--account NAME]`. */
export async function runBackfillPollCli(
  opts: {
    from: string;
    to: string;
    account?: string;
  },
  connect: ConnectPublisher,
): Promise<void> {
  await runCliAction(async () => {
    const from = parseRangeDate(opts.from, '--from', false);
    const to = parseRangeDate(opts.to, '--to', true);
    if (to <= from) throw new AppError('VALIDATION_FAILED', '--to: must be after --from');
    const connected = await connect('backfill');
    const { config } = connected;
    // No account configured: the sandbox of the `payrecon up` running on this data directory, if any
    // (`npm start`'s, as a newcomer runs it).
    const accounts = config.accounts.length > 0 ? config.accounts : runningSandboxAccounts(connected.sandbox);
    // Plain clients: a 429 is waited out per call (Retry-After), a backfill has no schedule to keep.
    const clientFor = clientsFor(accounts, { ...connected.providerOptions, logger: rootLogger });
    try {
      const databaseUrl = connected.databaseUrl;
      if (databaseUrl === null) {
        throw new AppError(
          'CONFIG_INVALID',
          'DATABASE_URL: must be set for this command (postgres://...), or a payrecon up running',
        );
      }
      if (accounts.length === 0) {
        throw new AppError(
          'CONFIG_INVALID',
          'PAYRECON_ACCOUNTS: must name the provider accounts to poll (or a payrecon up with its sandbox running)',
        );
      }
      if (opts.account !== undefined && !accounts.some((a) => a.name === opts.account)) {
        throw new AppError('VALIDATION_FAILED', '--account: must name a configured provider account');
      }
      const db = createDb(databaseUrl, 4);
      try {
        const result = await backfillPoll(
          {
            db,
            clientFor,
            publisher: connected.publisher,
            concurrency: config.poller.concurrency,
          },
          { from, to, ...(opts.account === undefined ? {} : { account: opts.account }) },
        );
        process.stdout.write(
          `re-polled ${result.entities} entit${result.entities === 1 ? 'y' : 'ies'}: ${result.published} observation(s) published, ${result.failed} failed\n`,
        );
        if (result.failed > 0) process.exitCode = 1;
      } finally {
        await db.destroy();
      }
    } finally {
      await connected.close();
    }
  });
}
