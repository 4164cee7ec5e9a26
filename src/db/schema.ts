/**
 * Kysely types of the ledger database. Amounts are `numeric` columns holding major units as exact
 * decimal text (`'123.45'`): `pg` returns numeric as a string and the repositories convert with
 * `parseAmount`/`formatAmount`, so an amount never becomes a JavaScript number. Ids of bigserial
 * columns are strings for the same reason. Table and column names are plain so that reports can read
 * them directly.
 */
import type { ColumnType, Generated, GeneratedAlways, Kysely } from 'kysely';
import type { ExceptionState } from '../domain/exception-queue.ts';
import type { ImportKind } from '../domain/imports.ts';
import type { MatchSummary } from '../domain/matching.ts';

/** A numeric column: decimal text in major units, e.g. `'123.45'` or `'-0.50'`. */
export type Numeric = string;
/** A timestamptz column: read as Date, written as Date or ISO text; defaults filled by the database. */
export type Timestamp = ColumnType<Date, Date | string, Date | string>;
export type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;
export type Json = ColumnType<Record<string, unknown>, string | Record<string, unknown>, string>;
export type NullableJson = ColumnType<
  Record<string, unknown> | null,
  string | Record<string, unknown> | null | undefined,
  string | null
>;

export type Book = 'live' | 'test' | 'crypto';

/** A merchant account (the provider account of the configuration). */
export interface MerchantAccountsTable {
  name: string;
  created_at: GeneratedTimestamp;
}

/** One ledger account per (merchant account, currency, book, name); `name` must belong to `book`. */
export interface LedgerAccountsTable {
  merchant_account: string;
  currency: string;
  book: Book;
  /** live: available, reserved, deposits, fees, payouts, refunds; test: test_available, test_deposits,
   * test_fees, test_reserved, test_refunds; crypto: crypto_payers, crypto_in_transit, crypto_customer_wallets. */
  name: string;
  created_at: GeneratedTimestamp;
}

/** The running balance of one ledger account (kept by the postings' trigger). */
export interface LedgerBalancesTable {
  merchant_account: string;
  currency: string;
  book: Book;
  account: string;
  balance: Generated<string>;
  updated_at: GeneratedTimestamp;
}

/**
 * Movements of a ledger account per effect, direction and UTC day (`hours` 24) or hour (`hours` 1)
 * starting at `bucket`: the sums of its postings in (positive) and out (negative), kept by the postings'
 * trigger.
 */
export interface LedgerMovementsTable {
  merchant_account: string;
  currency: string;
  book: Book;
  account: string;
  hours: number;
  bucket: Date;
  effect: string;
  direction: number;
  amount_in: string;
  amount_out: string;
}

/**
 * One immutable journal entry: one balance effect of one entity, applied (`direction` 1) or reversed
 * (`direction` -1, a mirror-image correction). `idempotency_key` is
 * `<kind>:<account>:<entity id>:<effect>` for the first application, with `:<seq>` appended for later
 * re-applications and `:reversal:<seq>` for reversals. The amount columns are the effect's parameters
 * (gross or fee amount, and for `early_release_reversal` the fee it also reverses); the postings are
 * the signed movements.
 */
export interface JournalEntriesTable {
  id: Generated<string>;
  idempotency_key: string;
  merchant_account: string;
  /** A payment's kind, or the cash leg's `settlement` and `bank_match` (src/domain/cash-leg.ts). */
  entity_kind: 'deposit' | 'cashout' | 'refund' | 'settlement' | 'bank_match';
  entity_id: string;
  /**
   * credit, fee, early_release_reversal, crypto_approved, crypto_delivered, reserve, release, settle,
   * late_reversal; the cash leg's settlement, settlement_fx_source, settlement_fx_target, bank_match.
   */
  effect: string;
  direction: 1 | -1;
  seq: number;
  book: Book;
  currency: string;
  amount: Numeric;
  fee_currency: string | null;
  fee_amount: Numeric | null;
  /** observed_at of the status that made the effect wanted. */
  effective_at: Timestamp;
  /** When the entry was booked (transaction time); balances "at an instant" use this. */
  created_at: GeneratedTimestamp;
  /** Who booked it and why, for entries an operator's decision caused (null for the provider's readings). */
  memo: ColumnType<Record<string, unknown> | null, string | null | undefined, never>;
  /** The rate a converted settlement was booked at, on both of its entries (decimal text); else null. */
  rate: ColumnType<string | null, string | null | undefined, never>;
}

/**
 * A signed posting (debit positive). The postings of each entry sum to zero per currency (checked by
 * the `postings_balanced_trg` statement trigger) and all lie in the entry's book.
 */
export interface PostingsTable {
  id: Generated<string>;
  entry_id: string;
  merchant_account: string;
  currency: string;
  book: Book;
  /** Ledger account name, e.g. `available`. */
  account: string;
  amount: Numeric;
  created_at: GeneratedTimestamp;
}

/** The merchant's own record of what it created (one row per intent id). */
export interface IntentsTable {
  intent_id: string;
  operation: 'deposit' | 'card_deposit' | 'cashout' | 'refund';
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  external_ref: string;
  entity_id: string | null;
  currency: string;
  amount: Numeric;
  expected_fee: Numeric | null;
  test: boolean;
  crypto: boolean;
  fee_on_payer: boolean;
  parent_deposit_id: string | null;
  outcome: 'created' | 'declined' | 'unknown';
  created_at: Timestamp;
  request: Json;
  response: Json | null;
  recorded_at: GeneratedTimestamp;
}

/**
 * Mirror of one provider entity (deposit, cashout or refund): the current state derived from its whole
 * status history (a cache written in the same transaction as the history and the postings), the
 * amounts in use, the link to the merchant's intent, and the polling schedule.
 */
export interface MirrorsTable {
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  entity_id: string;
  external_ref: string | null;
  /** Drawn from `mirror_versions` by every write, never twice; a batch claims the row by it (ledger/claim.ts). */
  version: Generated<string>;
  /** Last legal status; null while the entity is known only from an intent or was not found. */
  status: string | null;
  /** observed_at of the first observation of the current status. */
  status_since: Timestamp | null;
  ever_completed: Generated<boolean>;
  ever_early_released: Generated<boolean>;
  currency: string | null;
  /** Gross amount in use (provider's, else the intent's; cashouts: the intent's). */
  amount: Numeric | null;
  fee_currency: string | null;
  fee_amount: Numeric | null;
  fee_on_payer: Generated<boolean>;
  test: Generated<boolean>;
  crypto: Generated<boolean>;
  status_reason: string | null;
  payer_verification: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  parent_deposit_id: string | null;
  /** Deposit expiration_date when the provider reported it. */
  expires_at: Timestamp | null;
  /** The provider's bank-side id of a cashout, from the provider's status answer (never a notification). */
  bank_reference: string | null;
  details: Json;
  intent_id: string | null;
  first_seen_at: Timestamp | null;
  last_seen_at: Timestamp | null;
  /** observed_at of the first COMPLETED on the legal path (late-rejection window). */
  completed_at: Timestamp | null;
  /** Polls in a row that read the current status again (the schedule itself: `poll_schedule`). */
  poll_attempts: Generated<number>;
  created_at: GeneratedTimestamp;
  updated_at: GeneratedTimestamp;
  /**
   * Generated from the kind and status: the set the mirror is looked up in ('open': not final or in flight;
   * 'completed': a completed cashout or refund; 'cancelled': a cancelled deposit; else null)
   * (SQL function `mirror_watch`). Not indexed: the readers look the sets up in `mirror_watches`, which
   * the ledger's write statement keeps equal to it.
   */
  watch: GeneratedAlways<'open' | 'completed' | 'cancelled' | null>;
  /** Generated: `completed_at` of a completed cashout or refund, `status_since` of a cancelled deposit. */
  watch_at: GeneratedAlways<Date | null>;
}

/**
 * One row per mirror whose `watch` is not null, with its `watch`, `watch_at`, currency and test flag: the
 * sets' partial indexes, kept off `mirrors` so that a mirror update changing its set can still be HOT.
 * Written by the ledger's write statement with the mirror row;
 * `payrecon db verify` checks it against the mirrors.
 */
export interface MirrorWatchesTable {
  entity_id: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  merchant_account: string;
  watch: 'open' | 'completed' | 'cancelled';
  watch_at: Timestamp | null;
  currency: string | null;
  test: boolean;
}

/**
 * When the poller should ask the provider next about an entity: one row per mirror while it is scheduled,
 * none once it is not (never again). Kept off the mirror row so that a reading that changes nothing else
 * indexed updates the mirror HOT.
 */
export interface PollScheduleTable {
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  entity_id: string;
  next_poll_at: Timestamp;
  /** The hour `next_poll_at` falls in (generated; the poller's index holds it). */
  due_from: GeneratedAlways<Timestamp>;
}

/**
 * Append-only history of observations, one row per event id. `from_status` is the legal status before
 * this one when it was recorded; `stale`: older than a previously recorded observation; `illegal`: not
 * reachable from the legal path when recorded (not applied).
 */
export interface StatusHistoryTable {
  id: Generated<string>;
  event_id: string;
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund';
  entity_id: string;
  from_status: string | null;
  /** Observed status; null when the provider answered "not found". */
  to_status: string | null;
  source: 'webhook' | 'poll' | 'intent' | 'backfill' | 'operator';
  observed_at: Timestamp;
  recorded_at: GeneratedTimestamp;
  stale: boolean;
  illegal: boolean;
  external_ref: string | null;
  currency: string | null;
  amount: Numeric | null;
  fee_currency: string | null;
  fee_amount: Numeric | null;
  fee_on_payer: boolean | null;
  test: boolean;
  crypto: boolean;
  status_reason: string | null;
  payer_verification: string | null;
  rejection_code: string | null;
  rejection_reason: string | null;
  parent_deposit_id: string | null;
  details: Json;
}

/** One row per (type, merchant account, entity kind, entity id); re-raising bumps count and last_seen_at. */
export interface ExceptionsTable {
  id: Generated<string>;
  type: string;
  merchant_account: string;
  entity_kind: 'deposit' | 'cashout' | 'refund' | 'bank_line' | 'settlement';
  entity_id: string;
  severity: 'info' | 'low' | 'medium' | 'high' | 'critical';
  state: ColumnType<ExceptionState, ExceptionState | undefined>;
  count: Generated<number>;
  first_seen_at: Timestamp;
  last_seen_at: Timestamp;
  details: Json;
  resolution_note: string | null;
  resolved_by: string | null;
  resolved_at: Timestamp | null;
  /** Acknowledgement columns (finance page). */
  acknowledged_by: string | null;
  acknowledged_at: Timestamp | null;
  acknowledgement_note: string | null;
  /** The fact the exception is about: the same fact never reopens it. */
  fact: string | null;
  reopened_at: Timestamp | null;
  /** What changed when a new fact reopened it. */
  reopen_reason: string | null;
  /** The fact, details, note and resolver before it reopened. */
  previous: NullableJson;
  /** An operator's decision on an ILLEGAL_TRANSITION: accept the provider's status or keep the ledger's. */
  decision: NullableJson;
  /** A re-booking decision waiting for a controller's approval (who, what, why, when, reading); or null. */
  proposal: NullableJson;
  /** Who works it; null: nobody. */
  assignee: string | null;
  assigned_at: Timestamp | null;
  updated_at: GeneratedTimestamp;
}

/** What an audit event of an exception records; `propose`, `approve`, `reject`: the steps of a decision. */
export type ExceptionEventAction = 'state' | 'assign' | 'comment' | 'propose' | 'approve' | 'reject';

/** Append-only audit trail of an exception: state changes, assignments, comments (who, when, what). */
export interface ExceptionEventsTable {
  id: Generated<string>;
  exception_id: string;
  at: GeneratedTimestamp;
  actor: string;
  action: ExceptionEventAction;
  from_state: string | null;
  to_state: string | null;
  from_assignee: string | null;
  to_assignee: string | null;
  note: string | null;
}

/**
 * A month close per merchant account and currency (`period` `YYYY-MM`, src/db/closes/): prepared and
 * signed by one user, approved by another; frozen (trigger `closes_frozen_trg`), with `canonical` its
 * figures' canonical JSON and `sha256` the hash of that text.
 */
export interface ClosesTable {
  id: Generated<string>;
  merchant_account: string;
  currency: string;
  period: string;
  status: ColumnType<'prepared' | 'approved', 'prepared' | 'approved' | undefined>;
  prepared_by: string;
  prepared_at: GeneratedTimestamp;
  approved_by: string | null;
  approved_at: Timestamp | null;
  figures: Generated<Record<string, unknown>>;
  sha256: string | null;
  /** The period's instants [start, end) and the time zone it was read in. */
  period_start: Timestamp | null;
  period_end: Timestamp | null;
  time_zone: string | null;
  /** The signed figures as canonical JSON text; `sha256` is its SHA-256 (checked by the database). */
  canonical: string | null;
}

/** Alerts waiting to be published to `recon.alert.raised.v1`; `alert_id` is deterministic and unique. */
export interface OutboxTable {
  id: Generated<string>;
  alert_id: string;
  topic: string;
  /** Kafka key (`<kind>:<entity id>`). */
  key: string;
  payload: Json;
  created_at: GeneratedTimestamp;
  published_at: Timestamp | null;
  attempts: Generated<number>;
  last_error: string | null;
}

/** A cron tick's claim: inserting the deterministic `run_key` first wins. */
export interface JobRunsTable {
  run_key: string;
  job: string;
  owner: string | null;
  status: ColumnType<'running' | 'succeeded' | 'failed', 'running' | 'succeeded' | 'failed' | undefined>;
  started_at: GeneratedTimestamp;
  finished_at: Timestamp | null;
  error: string | null;
}

/** A generated workbook. */
export interface ReportRunsTable {
  id: Generated<string>;
  run_key: string;
  report: string;
  merchant_account: string | null;
  period_start: Timestamp | null;
  period_end: Timestamp | null;
  status: ColumnType<'running' | 'succeeded' | 'failed', 'running' | 'succeeded' | 'failed' | undefined>;
  file_path: string | null;
  row_count: number | null;
  error: string | null;
  created_at: GeneratedTimestamp;
  finished_at: Timestamp | null;
  /** What the run was asked and produced (finance page). */
  parameters: Generated<Record<string, unknown>>;
  row_counts: Generated<Record<string, unknown>>;
  sha256: string | null;
  files: Generated<unknown[]>;
  requested_by: string | null;
  trigger: Generated<string>;
  progress_done: Generated<string>;
  progress_total: Generated<string>;
  deleted_at: Timestamp | null;
}

/** Which alert reached which sink (alert dispatcher). */
export interface AlertDeliveriesTable {
  alert_id: string;
  sink: string;
  delivered_at: GeneratedTimestamp;
  digest: Generated<boolean>;
}

/** The one database handle type: a `Kysely<Database>` or a transaction of it (a `Transaction` is one). */
export type Db = Kysely<Database>;

/** The whole database as Kysely sees it. */
export interface Database {
  merchant_accounts: MerchantAccountsTable;
  /** Chart of accounts per merchant, currency and book. */
  ledger_accounts: LedgerAccountsTable;
  /** Running balance per ledger account. */
  ledger_balances: LedgerBalancesTable;
  /** Movements per ledger account, effect, direction and UTC day or hour. */
  ledger_movements: LedgerMovementsTable;
  /** Immutable journal: one row per applied or reversed effect. */
  journal_entries: JournalEntriesTable;
  /** Signed postings of the journal entries (debit positive). */
  postings: PostingsTable;
  /** Merchant intents (creation records). */
  intents: IntentsTable;
  /** Current state of each deposit, cashout and refund. */
  mirrors: MirrorsTable;
  /** The mirrors' sets (`watch`), indexed for their readers. */
  mirror_watches: MirrorWatchesTable;
  /** The poller's schedule: entities with a next poll. */
  poll_schedule: PollScheduleTable;
  /** Every observation ever recorded, append-only. */
  status_history: StatusHistoryTable;
  /** Reconciliation exceptions. */
  exceptions: ExceptionsTable;
  /** Alerts to publish. */
  outbox: OutboxTable;
  job_runs: JobRunsTable;
  report_runs: ReportRunsTable;
  alert_deliveries: AlertDeliveriesTable;
  exception_events: ExceptionEventsTable;
  closes: ClosesTable;
  /** Imported files, their bank statements, and the lines and report rows they brought (each once). */
  imports: ImportsTable;
  import_statements: ImportStatementsTable;
  bank_statement_lines: BankStatementLinesTable;
  provider_transaction_rows: ProviderTransactionRowsTable;
  provider_settlement_rows: ProviderSettlementRowsTable;
  /** The latest check of the provider's balance per merchant account and currency. */
  provider_balance_checks: ProviderBalanceChecksTable;
  /** API bearer tokens made with `payrecon api token create`: the scrypt hash only. */
  api_tokens: ApiTokensTable;
  /** The page's sessions: a row per sign-in, named by the SHA-256 of the cookie's token. */
  web_sessions: WebSessionsTable;
  /** The page's failed sign-ins, counted per typed user name and per address (both as HMACs). */
  web_sign_in_failures: WebSignInFailuresTable;
  /** Matches of imported lines (rule or manual; ended, never deleted) and their members. */
  matches: MatchesTable;
  match_members: MatchMembersTable;
}

/** A session of the page; an ended one keeps its row (when and why) until it has long expired. */
export interface WebSessionsTable {
  /** SHA-256 (hex) of the session token; the token itself is only in the cookie. */
  id: string;
  username: string;
  /** SHA-256 (hex) of the user's configured password hash at sign-in: another hash ends the session. */
  password_fingerprint: string;
  /** The user's role at sign-in (the page applies the configured one). */
  role: string;
  created_at: Timestamp;
  last_seen_at: Timestamp;
  expires_at: Timestamp;
  ended_at: Timestamp | null;
  /** 'signed-out', 'user-removed' or 'password-changed'. */
  ended_reason: string | null;
}

/** One failed (or running) sign-in attempt under one subject: `user:<hmac>` or `address:<hmac>`. */
export interface WebSignInFailuresTable {
  id: Generated<string>;
  subject: string;
  failed_at: Timestamp;
}

export interface MatchesTable {
  id: Generated<string>;
  pair: 'bank-settlement' | 'provider-ledger';
  /** The rule's name, or 'manual'. */
  rule: string;
  /** Sum of the left side minus sum of the right side, major units. */
  difference: Generated<Numeric>;
  created_at: Generated<Timestamp>;
  created_by: string;
  note: string | null;
  ended_at: Timestamp | null;
  ended_by: string | null;
  end_note: string | null;
}

export interface MatchMembersTable {
  match_id: string;
  side: 'bank_line' | 'settlement' | 'provider_row' | 'ledger_payment';
  identity: string;
  live: Generated<boolean>;
}

/** An API token kept in the database; a revoked one keeps its row. */
export interface ApiTokensTable {
  id: string;
  name: string;
  scopes: string[];
  /** `scrypt$...` of the token; the token itself is never stored. */
  hash: string;
  created_at: GeneratedTimestamp;
  created_by: string;
  expires_at: Timestamp | null;
  revoked_at: Timestamp | null;
  last_used_at: Timestamp | null;
}

/** One imported file: a bank statement or a provider report, recorded once per upload. */
export interface ImportsTable {
  id: Generated<string>;
  kind: ImportKind;
  file_name: string;
  sha256: string;
  profile: string | null;
  imported_by: string;
  imported_at: Generated<Date>;
  lines: number;
  new_lines: number;
  skipped: Generated<number>;
  /** The matching run the import started (src/db/imports/matching.ts); null: none finished for it. */
  matching: ColumnType<MatchSummary | null, string | null | undefined, string | null>;
}

export interface ImportStatementsTable {
  import_id: string;
  position: number;
  statement_id: string | null;
  format: string;
  bank_account: string;
  currency: string;
  opening: Numeric | null;
  closing: Numeric | null;
  credits: Numeric;
  debits: Numeric;
  booked: number;
  pending: number;
  new_lines: number;
  /** The closing balance's date; null on statements imported before it was kept. */
  closing_date: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface BankStatementLinesTable {
  identity: string;
  import_id: string;
  content_hash: string;
  bank_account: string;
  currency: string;
  reference: string | null;
  booking_date: string;
  value_date: string | null;
  amount: Numeric;
  reversal: boolean;
  end_to_end_ids: string[];
  counterparty: string | null;
  description: string | null;
  transactions: Json;
}

export interface ProviderTransactionRowsTable {
  identity: string;
  import_id: string;
  content_hash: string;
  transaction_id: string;
  type: string;
  status: string;
  external_id: string | null;
  invoice_id: string | null;
  currency: string;
  gross: Numeric;
  fee: Numeric;
  net: Numeric;
  created_at: Timestamp;
  updated_at: Timestamp | null;
  settlement_id: string | null;
}

/** The latest check of the provider's balance of a merchant account and currency against the ledger's. */
export interface ProviderBalanceChecksTable {
  merchant_account: string;
  currency: string;
  /** The settlement whose report row gave the provider's balance, and its cut-off. */
  settlement_id: string;
  cutoff: Timestamp;
  provider: Numeric;
  ledger: Numeric;
  checked_at: Timestamp;
  /** Since when the checks have differed without a break; null while they agree. */
  differs_since: Timestamp | null;
}

export interface ProviderSettlementRowsTable {
  identity: string;
  import_id: string;
  content_hash: string;
  settlement_id: string;
  account: string | null;
  period_start: Timestamp | null;
  period_end: Timestamp | null;
  currency: string;
  gross: Numeric;
  fees: Numeric;
  settlement_currency: string;
  rate: Numeric;
  net: Numeric;
  value_date: string;
  bank_reference: string | null;
  /**
   * The provider's balance in `currency` at the cut-off, before the payout (what was left unsettled), when
   * its report gives one; compared with the ledger's `available` at the cut-off (src/db/matching/balance-drift.ts).
   */
  balance_at_cutoff: Numeric | null;
}
