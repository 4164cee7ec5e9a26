/**
 * The zod schemas of `/api/v1`: what requests may carry (path, query, body) and what responses hold.
 * The plugin validates requests and responses with them and the OpenAPI document is generated from
 * them (`openapi.ts`), so the contract is written once. Amounts are decimal strings in major units
 * (`"1234.50"`), instants ISO 8601 with an offset.
 */
import { z } from 'zod';
import { DECISIONS } from '../db/exceptions/decisions.ts';
import { PAYMENT_ID_KINDS } from '../db/read-models/payments.ts';
import { AGE_BUCKET_KEYS, EXCEPTION_STATES } from '../domain/exception-queue.ts';
import { EXCEPTION_ENTITY_KINDS } from '../domain/exception-rules.ts';
import { IMPORT_KINDS } from '../domain/imports.ts';
import { type Minor, parseAmount } from '../domain/money.ts';
import { ENTITY_KINDS } from '../domain/statuses.ts';
import { WORKBOOK_DECISIONS } from '../domain/workbook-decisions.ts';
import { REPORT_KINDS } from '../reports/runs.ts';

// ---------------------------------------------------------------- building blocks

/** An amount as the API writes it: decimal text, two decimals, optional minus. */
export const Amount = z
  .string()
  .regex(/^-?\d{1,40}\.\d{2}$/)
  .meta({ description: 'Decimal amount in major units with two decimals, as text', examples: ['1234.50'] });

/** An instant as the API writes it (UTC, `Z`). */
export const Instant = z.iso.datetime({ offset: true }).meta({ description: 'ISO 8601 instant with offset' });

const Currency = z
  .string()
  .regex(/^[A-Z0-9]{3,8}$/, 'must be a currency code (3 to 8 capitals or digits)')
  .meta({ description: 'Currency code (ISO 4217, or a crypto code)' });
const Book = z.enum(['live', 'test', 'crypto']);
const EntityKind = z.enum(ENTITY_KINDS);
const ExceptionStateEnum = z.enum(EXCEPTION_STATES);
const Text = (max: number) => z.string().min(1, 'must not be empty').max(max, `at most ${max} characters`);

/** Query instant: ISO 8601 with an offset, read as a Date. */
const InstantParam = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 instant with offset, e.g. 2026-11-24T10:00:00Z' })
  .transform((s) => new Date(s));
/** Query amount: decimal text, read as bigint minor units. */
const AmountParam = z
  .string()
  .regex(/^\d{1,18}(\.\d{1,2})?$/, 'must be a decimal amount, e.g. 100.00')
  .transform((s): Minor => parseAmount(s));
const BoolParam = z.enum(['true', 'false'], 'must be true or false').transform((s) => s === 'true');
const LimitParam = (max: number, dflt: number) =>
  z
    .string()
    .regex(/^\d{1,4}$/, `must be an integer from 1 to ${max}`)
    .transform(Number)
    .pipe(
      z
        .number()
        .int()
        .min(1, `must be an integer from 1 to ${max}`)
        .max(max, `must be an integer from 1 to ${max}`),
    )
    .optional()
    .transform((n) => n ?? dflt);
const Cursor = z.string().regex(/^[A-Za-z0-9_-]{1,512}$/, 'must be a cursor returned by a previous page');
const IdParam = z.string().regex(/^\d{1,18}$/, 'must be a numeric id');

// ---------------------------------------------------------------- errors

/** RFC 9457 problem details; `errors` names each field and the rule it broke. */
export const Problem = z.object({
  type: z.string().meta({ description: 'URI reference identifying the problem type' }),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  instance: z.string().optional(),
  errors: z
    .array(
      z.object({
        in: z.enum(['path', 'query', 'body', 'header']),
        field: z.string(),
        rule: z.string(),
      }),
    )
    .optional(),
});
export type Problem = z.infer<typeof Problem>;

// ---------------------------------------------------------------- balances and movements

export const BalancesQuery = z.object({
  at: InstantParam.optional().meta({ description: 'Balances as booked up to this instant (default: now)' }),
  account: Text(200).optional().meta({ description: 'Merchant account' }),
  currency: Currency.optional(),
  book: Book.optional(),
});

export const BalancesResponse = z.object({
  at: Instant,
  balances: z.array(
    z.object({
      merchantAccount: z.string(),
      currency: z.string(),
      book: Book,
      account: z.string().meta({
        description:
          'Ledger account, e.g. available, reserved, settlements_in_transit, settlement_fees, fx_conversion, bank_fees, bank:<bank account id>',
      }),
      balance: Amount,
    }),
  ),
});

export const ProviderBalancesQuery = z.object({
  account: Text(200).optional().meta({ description: 'Merchant account' }),
  currency: Currency.optional(),
});

export const ProviderBalancesResponse = z.object({
  checks: z.array(
    z.object({
      merchantAccount: z.string(),
      currency: z.string(),
      settlementId: z.string().meta({ description: 'The settlement whose report row gave the balance' }),
      cutoff: Instant,
      provider: Amount.meta({ description: "The provider's balance at the cut-off" }),
      ledger: Amount.meta({
        description: "The ledger's available at the cut-off, as the provider dates the moves",
      }),
      difference: Amount.meta({ description: 'provider - ledger' }),
      checkedAt: Instant.meta({ description: 'When the matching run made the check' }),
      differsSince: Instant.nullable().meta({
        description:
          'Since when the checks have differed without a break (null while they agree); PROVIDER_BALANCE_DRIFT is raised once this is PAYRECON_MATCH_LEDGER_WAIT_SECONDS old',
      }),
    }),
  ),
});

export const MovementsQuery = z.object({
  from: InstantParam.meta({ description: 'Start, inclusive' }),
  to: InstantParam.meta({ description: 'End, exclusive' }),
  account: Text(200).optional(),
  currency: Currency.optional(),
  book: Book.optional(),
});

export const MovementsResponse = z.object({
  from: Instant,
  to: Instant,
  movements: z.array(
    z.object({
      merchantAccount: z.string(),
      currency: z.string(),
      book: Book,
      effect: z.string().meta({ description: 'credit, fee, reserve, release, settle, late_reversal, ...' }),
      direction: z.union([z.literal(1), z.literal(-1)]).meta({ description: '1 applied, -1 reversed' }),
      account: z.string(),
      amount: Amount,
      entries: z.number().int(),
    }),
  ),
});

// ---------------------------------------------------------------- payments

export const Payment = z.object({
  merchantAccount: z.string(),
  kind: EntityKind,
  entityId: z.string().meta({ description: 'deposit id, cashout id or refund id at the provider' }),
  externalRef: z
    .string()
    .nullable()
    .meta({ description: "The merchant's id: invoice id of a deposit, external id of a cashout" }),
  bankReference: z.string().nullable().meta({
    description: "The provider's bank-side id of a cashout (provider_external_reference, bank_reference_id)",
  }),
  intentId: z.string().nullable(),
  status: z.string().nullable(),
  statusSince: Instant.nullable(),
  statusReason: z.string().nullable(),
  currency: z.string().nullable(),
  amount: Amount.nullable(),
  fee: z.object({ currency: z.string(), amount: Amount }).nullable(),
  test: z.boolean(),
  crypto: z.boolean(),
  parentDepositId: z.string().nullable(),
  firstSeenAt: Instant.nullable(),
  lastSeenAt: Instant.nullable(),
  knownSince: Instant.meta({ description: 'When payrecon first recorded it' }),
});

export const PaymentLookupQuery = z.object({
  id: Text(200).meta({ description: 'Any id of the payment' }),
  idKind: z.enum(PAYMENT_ID_KINDS).optional().meta({ description: 'Which id it is (default: any)' }),
});

export const PaymentLookupResponse = z.object({ matches: z.array(Payment).min(1) });

export const PaymentListQuery = z.object({
  account: Text(200).optional(),
  kind: EntityKind.optional(),
  status: z
    .string()
    .regex(/^[A-Z_]{1,40}$/, 'must be a provider status, e.g. COMPLETED')
    .optional(),
  currency: Currency.optional(),
  test: BoolParam.optional(),
  from: InstantParam.optional().meta({ description: 'Known since, inclusive' }),
  to: InstantParam.optional().meta({ description: 'Known since, exclusive' }),
  limit: LimitParam(500, 100),
  cursor: Cursor.optional(),
});

export const PaymentListResponse = z.object({
  items: z.array(Payment),
  nextCursor: z
    .string()
    .nullable()
    .meta({ description: 'Pass as `cursor` for the next page; null: last page' }),
});

export const PaymentParams = z.object({
  account: Text(200),
  kind: EntityKind,
  entityId: Text(200),
});

export const PaymentDetailResponse = z.object({
  payment: Payment,
  intent: z
    .object({
      intentId: z.string(),
      operation: z.string(),
      currency: z.string(),
      amount: Amount,
      outcome: z.string(),
      createdAt: Instant,
    })
    .nullable(),
  history: z.array(
    z.object({
      eventId: z.string(),
      source: z.string(),
      fromStatus: z.string().nullable(),
      toStatus: z.string().nullable(),
      observedAt: Instant,
      recordedAt: Instant,
      stale: z.boolean(),
      illegal: z.boolean(),
      currency: z.string().nullable(),
      amount: Amount.nullable(),
      statusReason: z.string().nullable(),
    }),
  ),
  entries: z.array(
    z.object({
      id: z.string(),
      effect: z.string(),
      direction: z.union([z.literal(1), z.literal(-1)]),
      book: z.string(),
      currency: z.string(),
      amount: Amount,
      effectiveAt: Instant,
      bookedAt: Instant,
      postings: z.array(z.object({ account: z.string(), amount: Amount })),
      decision: z
        .object({
          decision: z.string(),
          by: z.string(),
          proposedBy: z.string().nullable().meta({ description: 'Who proposed it, when `by` approved it' }),
          note: z.string(),
          exceptionId: z.string(),
        })
        .nullable()
        .meta({
          description:
            "An entry booked by an operator's decision on an ILLEGAL_TRANSITION or FACTS_CHANGED: who, why, which exception",
        }),
    }),
  ),
  exceptions: z.array(
    z.object({ id: z.string(), type: z.string(), severity: z.string(), state: z.string() }),
  ),
  alerts: z.array(
    z.object({
      alertId: z.string(),
      type: z.string(),
      severity: z.string(),
      raisedAt: Instant,
      publishedAt: Instant.nullable().meta({ description: 'When the relay put it on recon.alert.raised.v1' }),
      deliveredTo: z.array(z.string()).meta({ description: 'Sinks that took it: log, slack, webhook' }),
    }),
  ),
});

// ---------------------------------------------------------------- exceptions

export const ExceptionListQuery = z.object({
  type: z
    .string()
    .regex(/^[A-Z_]{1,60}$/, 'must be an exception type, e.g. AMOUNT_MISMATCH')
    .optional(),
  state: ExceptionStateEnum.optional().meta({ description: 'Default: every state but resolved' }),
  assignee: Text(200).optional().meta({ description: 'A user name, or `-` for unassigned' }),
  account: Text(200).optional(),
  currency: Currency.optional(),
  age: z.enum(AGE_BUCKET_KEYS).optional().meta({ description: 'Time since first seen' }),
  minAmount: AmountParam.optional(),
  maxAmount: AmountParam.optional(),
  overdue: BoolParam.optional().meta({
    description: 'Unresolved past its due time (the service-level table, PAYRECON_EXCEPTION_SLA)',
  }),
  limit: LimitParam(500, 100),
  cursor: Cursor.optional(),
});

export const ExceptionExportQuery = ExceptionListQuery.omit({ limit: true, cursor: true });

export const Exception = z.object({
  id: z.string(),
  type: z.string(),
  severity: z.string(),
  state: ExceptionStateEnum,
  merchantAccount: z.string(),
  kind: z.enum(EXCEPTION_ENTITY_KINDS).meta({
    description: 'A payment kind, or bank_line (a bank statement line) or settlement (a provider settlement)',
  }),
  entityId: z.string(),
  count: z.number().int(),
  firstSeenAt: Instant,
  lastSeenAt: Instant,
  ageSeconds: z.number().int(),
  dueAt: Instant.meta({
    description:
      'First seen plus its service level (the strictest matching PAYRECON_EXCEPTION_SLA rule, else PAYRECON_EXCEPTION_SLA_MINUTES)',
  }),
  overdue: z.boolean().meta({ description: 'Unresolved and past dueAt' }),
  assignee: z.string().nullable(),
  assignedAt: Instant.nullable(),
  currency: z.string().nullable(),
  amount: Amount.nullable(),
  details: z.record(z.string(), z.unknown()),
  resolvedBy: z.string().nullable(),
  resolvedAt: Instant.nullable(),
  resolutionNote: z.string().nullable(),
  reopenedAt: Instant.nullable().meta({ description: 'When a new fact reopened it' }),
  reopenReason: z.string().nullable().meta({ description: 'What changed when it reopened' }),
  previous: z
    .record(z.string(), z.unknown())
    .nullable()
    .meta({ description: 'The fact, details, note and resolver before it reopened' }),
  decision: z.record(z.string(), z.unknown()).nullable().meta({
    description: 'The decision on an ILLEGAL_TRANSITION or FACTS_CHANGED (who proposed and who approved it)',
  }),
  proposal: z.record(z.string(), z.unknown()).nullable().meta({
    description:
      'A decision that re-books the ledger, proposed and waiting for approval: decision, by, note, at',
  }),
  updatedAt: Instant,
});

export const ExceptionListResponse = z.object({
  items: z.array(Exception),
  nextCursor: z.string().nullable(),
});

export const ExceptionParams = z.object({ id: IdParam });

export const ExceptionEvent = z.object({
  id: z.string(),
  at: Instant,
  actor: z.string(),
  action: z.enum(['state', 'assign', 'comment', 'propose', 'approve', 'reject']).meta({
    description:
      'propose, approve, reject: the steps of a decision that re-books the ledger (proposed, then approved or rejected by a controller who did not propose it)',
  }),
  fromState: z.string().nullable(),
  toState: z.string().nullable(),
  fromAssignee: z.string().nullable(),
  toAssignee: z.string().nullable(),
  note: z.string().nullable(),
});

export const ExceptionDetailResponse = z.object({ exception: Exception, events: z.array(ExceptionEvent) });

export const StateChangeBody = z.strictObject({
  state: ExceptionStateEnum,
  note: Text(2000).optional(),
});
export const AssignBody = z.strictObject({
  assignee: Text(200).nullable().meta({ description: 'A user name; null unassigns' }),
  note: Text(2000).optional(),
});
export const CommentBody = z.strictObject({ note: Text(2000) });

export const BulkStateBody = z.strictObject({
  ids: z
    .array(z.string().regex(/^\d{1,18}$/, 'must be a numeric id'))
    .min(1, 'at least one id')
    .max(500, 'at most 500 ids'),
  state: ExceptionStateEnum,
  note: Text(2000).optional(),
});
export const BulkStateResponse = z.object({
  results: z.array(
    z.object({
      id: z.string(),
      outcome: z.enum(['changed', 'unchanged', 'not_found', 'needs_decision']).meta({
        description:
          'unchanged: it already was in that state; needs_decision: an ILLEGAL_TRANSITION or FACTS_CHANGED is resolved by POST /exceptions/{id}/decision',
      }),
    }),
  ),
});

export const DecisionBody = z.strictObject({
  decision: z.enum(DECISIONS).meta({
    description:
      "accept-provider: the ledger books the provider's status; keep-ledger: the ledger stays as it is",
  }),
  note: Text(2000).meta({ description: 'Why (required: it is what the next person reads)' }),
});
export const ApprovalBody = z.strictObject({
  note: Text(2000)
    .optional()
    .meta({ description: 'Why (required to reject: it is what the proposer reads)' }),
});
export const RejectionResponse = z.object({ exception: Exception, events: z.array(ExceptionEvent) });
export const DecisionResponse = z.object({
  outcome: z.enum(['decided', 'proposed']).meta({
    description:
      "decided: the exception is resolved (keep-ledger, or an approval); proposed: accept-provider is recorded, nothing booked, until a token with exceptions:approve other than the proposer's approves it",
  }),
  decision: z.enum(DECISIONS),
  status: z.string().nullable().meta({ description: "The entity's status in the ledger afterwards" }),
  providerStatus: z.string(),
  ledgerStatus: z.string().nullable(),
  entriesBooked: z.number().int(),
  summary: z.string().meta({ description: 'What was decided, in words (the start of the resolution note)' }),
  exception: Exception,
  events: z.array(ExceptionEvent),
});

export const WorkbookDecisionsResponse = z.object({
  decided: z.number().int().meta({ description: 'Rows resolved at once (keep-ledger)' }),
  proposed: z
    .number()
    .int()
    .meta({ description: 'Rows proposed (accept-provider): booked once another approves' }),
  approved: z.number().int().meta({ description: 'Proposals approved: booked and resolved' }),
  rejected: z.number().int().meta({ description: 'Proposals rejected: nothing booked' }),
  rows: z.array(
    z.object({
      sheet: z.string(),
      row: z.number().int().meta({ description: "The row's number in its sheet" }),
      id: z.string().meta({ description: "The exception's id" }),
      decision: z.enum(WORKBOOK_DECISIONS),
      outcome: z.enum(['decided', 'proposed', 'approved', 'rejected']),
    }),
  ),
});

// ---------------------------------------------------------------- reports

export const Report = z.object({
  id: z.string(),
  kind: z.enum(REPORT_KINDS),
  account: z.string().nullable(),
  from: z.string().meta({ description: 'First business day, YYYY-MM-DD' }),
  to: z.string().meta({ description: 'Last business day (inclusive), YYYY-MM-DD' }),
  status: z.enum(['running', 'succeeded', 'failed']),
  progress: z.object({ done: z.number().int(), total: z.number().int() }).nullable(),
  rowCounts: z.record(z.string(), z.number().int()),
  sha256: z.string().nullable(),
  files: z.array(z.object({ name: z.string(), label: z.string(), href: z.string() })),
  requestedBy: z.string().nullable(),
  trigger: z.string(),
  createdAt: Instant,
  finishedAt: Instant.nullable(),
  error: z.string().nullable(),
});

export const ReportListQuery = z.object({ limit: LimitParam(200, 50) });
export const ReportListResponse = z.object({ items: z.array(Report) });
export const ReportParams = z.object({ id: IdParam });
export const ReportFileParams = z.object({
  id: IdParam,
  name: z.string().regex(/^[\w.-]{1,200}$/, 'must be a file name listed on the report'),
});

const DateText = z.iso.date('must be a date YYYY-MM-DD');
export const ReportRequestBody = z
  .strictObject({
    kind: z.enum(REPORT_KINDS),
    from: DateText,
    to: DateText,
    account: Text(200).nullable().optional(),
  })
  .refine((b) => b.from <= b.to, { path: ['to'], message: 'must not be before from' });

// ---------------------------------------------------------------- closes

export const Close = z.object({
  id: z.string(),
  merchantAccount: z.string(),
  currency: z.string(),
  period: z.string().meta({ description: 'YYYY-MM' }),
  status: z.enum(['prepared', 'approved']),
  preparedBy: z.string(),
  preparedAt: Instant,
  approvedBy: z.string().nullable(),
  approvedAt: Instant.nullable(),
  sha256: z.string().nullable(),
  figures: z.record(z.string(), z.unknown()).meta({
    description:
      'The signed document, in the version it was signed with (v). Version 2: each bankProof line explains its difference (firstStatement, openingBeforeFirst, linesNotInLedger, linesAfterStatement, inTransit, unexplained); version 1: unmatched with one unmatchedTotal',
  }),
});
export const CloseListQuery = z.object({
  account: Text(200).optional(),
  currency: Currency.optional(),
  period: z
    .string()
    .regex(/^\d{4}-(0[1-9]|1[0-2])$/, 'must be a month YYYY-MM')
    .optional(),
});
export const CloseListResponse = z.object({ items: z.array(Close) });
export const CloseParams = z.object({ id: IdParam });

// ---------------------------------------------------------------- imports

/** An imported amount: decimal text in major units as the file gave it (its currency's decimals). */
const Decimal = z
  .string()
  .regex(/^-?\d{1,40}(\.\d{1,10})?$/)
  .meta({ description: 'Decimal amount in major units, as text', examples: ['1234.50'] });
const ImportKindEnum = z.enum(IMPORT_KINDS);

export const ImportQuery = z.object({
  kind: ImportKindEnum.meta({ description: 'What the file is' }),
  fileName: z
    .string()
    .min(1, 'must be a file name (1 to 200 characters, no slash)')
    .max(200, 'must be a file name (1 to 200 characters, no slash)')
    .refine(
      (s) => ![...s].some((c) => c === '/' || c === '\\' || c.charCodeAt(0) < 32),
      'must be a file name (1 to 200 characters, no slash)',
    )
    .optional()
    .meta({ description: 'The file name to record (default: upload)' }),
  profile: Text(100)
    .optional()
    .meta({ description: "A built-in profile's name for a CSV or XLSX file (default: the kind's own)" }),
  account: Text(34)
    .optional()
    .meta({ description: 'The bank account of a CSV or XLSX statement without an account column' }),
  dryRun: BoolParam.optional().meta({ description: 'Read and check only: nothing is recorded' }),
});

export const ImportedStatement = z.object({
  account: z.string(),
  currency: z.string(),
  opening: Decimal.nullable(),
  closing: Decimal.nullable(),
  credits: Decimal,
  debits: Decimal,
  booked: z.number().int().meta({ description: 'Booked entries' }),
  pending: z.number().int().meta({ description: 'Pending entries (counted, not imported)' }),
  new: z.number().int().nullable().meta({ description: 'Lines not imported before; null on a dry run' }),
});

const Count = z.number().int().min(0);

/** The matching run an import started: counts only, no amounts. */
export const ImportMatching = z
  .object({
    matched: z.record(z.string(), Count).meta({ description: 'New matches by rule name' }),
    unmatched: z
      .object({ bankLines: Count, settlements: Count, reportRows: Count })
      .meta({ description: "Imported lines left in no match after the run, this file's and earlier ones" }),
    exceptions: z
      .record(z.string(), Count)
      .meta({ description: 'Exceptions the run raised or found still true, by type' }),
    resolved: Count.meta({ description: 'Exceptions a match resolved' }),
  })
  .nullable()
  .meta({
    description:
      'The matching run the import started; null on a dry run, when no line was new (no run), or when no run finished for it (the next matching run takes its lines)',
  });

export const ImportResultResponse = z.object({
  id: z.string().nullable().meta({ description: 'The recorded import; null on a dry run' }),
  kind: ImportKindEnum,
  fileName: z.string(),
  result: z
    .union([
      z.object({ statements: z.array(ImportedStatement), matching: ImportMatching }),
      z.object({
        kind: z.enum(['provider-transactions', 'provider-settlements']),
        rows: z.number().int(),
        new: z.number().int().nullable(),
        matching: ImportMatching,
      }),
    ])
    .meta({ description: 'What `payrecon import --json` prints' }),
});

export const ImportStatement = z.object({
  position: z.number().int(),
  statementId: z.string().nullable(),
  format: z.string(),
  bankAccount: z.string(),
  currency: z.string(),
  opening: Decimal.nullable(),
  closing: Decimal.nullable(),
  credits: Decimal,
  debits: Decimal,
  booked: z.number().int(),
  pending: z.number().int(),
  newLines: z.number().int(),
});

export const Import = z.object({
  id: z.string(),
  kind: ImportKindEnum,
  fileName: z.string(),
  sha256: z.string(),
  profile: z.string().nullable(),
  importedBy: z.string(),
  importedAt: Instant,
  lines: z.number().int().meta({ description: 'Lines in the file (booked entries, rows)' }),
  newLines: z.number().int().meta({ description: 'Lines not imported before' }),
  skipped: z.number().int().meta({ description: 'Pending entries counted and not imported' }),
  statements: z.array(ImportStatement),
  matching: ImportMatching,
});

export const ImportListQuery = z.object({ limit: LimitParam(500, 50) });
export const ImportListResponse = z.object({ items: z.array(Import) });
export const ImportParams = z.object({ id: IdParam });
export const ImportDetailResponse = z.object({
  import: Import,
  lines: z.array(
    z.object({
      identity: z.string(),
      date: z.string(),
      reference: z.string().nullable(),
      type: z.string(),
      status: z.string().nullable(),
      currency: z.string(),
      amount: Decimal,
      fee: Decimal.nullable(),
      net: Decimal.nullable(),
      netCurrency: z.string().nullable(),
      settlementId: z.string().nullable(),
      description: z.string().nullable(),
    }),
  ),
  more: z.boolean().meta({ description: 'The import brought more lines than the first 1,000 shown' }),
});
// Reconciliation: a bank account's day and the matches of bank lines to settlements.
export const ReconciliationParams = z.object({
  bankAccount: Text(34).meta({ description: 'A configured bank account (PAYRECON_BANK_ACCOUNTS id)' }),
  date: DateText,
});
const ReconciliationLine = z.object({
  identity: z.string(),
  reference: z.string().nullable(),
  bookingDate: z.string(),
  valueDate: z.string().nullable(),
  amount: Amount,
  reversal: z.boolean(),
  description: z.string().nullable(),
  ageDays: z.number().int(),
  match: z.object({ id: z.string(), rule: z.string() }).nullable(),
});
const MatchOut = z.object({
  id: z.string(),
  pair: z.string(),
  rule: z.string().meta({ description: "The rule's name, or manual" }),
  difference: Amount,
  createdAt: Instant,
  createdBy: z.string(),
  note: z.string().nullable(),
  endedAt: Instant.nullable(),
  endedBy: z.string().nullable(),
  endNote: z.string().nullable(),
  members: z.array(
    z.object({
      side: z.string().meta({ description: 'bank_line or settlement' }),
      identity: z.string(),
      label: z.string().meta({ description: "A bank line's reference, a settlement's id" }),
      amount: Amount.nullable(),
    }),
  ),
});
export const ReconciliationDayResponse = z.object({
  bankAccount: z.string(),
  currency: z.string(),
  merchantAccount: z.string(),
  date: z.string(),
  dayEnd: Instant.meta({ description: "The day's end in PAYRECON_TIMEZONE" }),
  statement: z.object({ opening: Amount.nullable(), closing: Amount.nullable() }),
  ledger: Amount.meta({
    description: "The ledger's bank:<id> balance at the day's end, by effect day",
  }),
  ledgerOpening: Amount.meta({ description: "The same before the day's start" }),
  difference: Amount.nullable().meta({ description: 'Statement closing minus ledger' }),
  proof: z
    .object({
      firstStatement: z
        .object({
          importId: z.string(),
          statementId: z.string().nullable(),
          date: z.string().meta({ description: 'The booking date of its first line' }),
          opening: Amount.nullable(),
        })
        .nullable()
        .meta({
          description: "The bank account's first imported statement (the one whose lines start earliest)",
        }),
      openingBeforeFirst: Amount.nullable().meta({
        description:
          "The first statement's opening balance: what the account held before payrecon's statements",
      }),
      notInLedger: z.object({
        count: z.number().int(),
        total: Amount.meta({ description: 'What the ledger lacks of them, summed' }),
        lines: z
          .array(
            z.object({
              identity: z.string(),
              reference: z.string().nullable(),
              bookingDate: z.string(),
              amount: Amount,
              missing: Amount.meta({
                description: 'What of it the ledger lacks at the day end',
              }),
              description: z.string().nullable(),
              counted: z.number().int().meta({
                description:
                  "How many times the ledger's bank entries count it by the day end (missing = amount x (1 - counted))",
              }),
              matchedNow: z.boolean().meta({ description: 'A live match covers it now' }),
              ageDays: z.number().int(),
            }),
          )
          .meta({ description: 'The latest 500 of them, newest first' }),
      }),
      explained: Amount.nullable().meta({ description: 'openingBeforeFirst + notInLedger.total' }),
      unexplained: Amount.nullable().meta({
        description:
          'difference - explained: 0.00 when everything is accounted for; null when a balance is unknown',
      }),
    })
    .meta({
      description:
        'Why the statement closing differs from the ledger: closing - openingBeforeFirst - notInLedger.total - ledger = unexplained',
    }),
  share: z.object({
    lines: z.number().int(),
    matchedLines: z.number().int(),
    amount: Amount,
    matchedAmount: Amount,
  }),
  lines: z.array(ReconciliationLine),
  openSettlements: z.array(
    z.object({
      identity: z.string(),
      settlementId: z.string(),
      valueDate: z.string(),
      net: Amount,
      currency: z.string(),
      bankReference: z.string().nullable(),
      ageDays: z.number().int(),
    }),
  ),
  matches: z.array(MatchOut),
  previous: z.string().nullable(),
  next: z.string().nullable(),
});
export const MatchListQuery = z.object({
  bankAccount: Text(34).optional(),
  from: DateText.optional(),
  to: DateText.optional(),
  limit: LimitParam(1000, 100),
});
export const MatchListResponse = z.object({ items: z.array(MatchOut) });
const Identities = z.array(Text(200)).min(1, 'must name at least one').max(100, 'at most 100');
export const ManualMatchBody = z.strictObject({
  lines: Identities.meta({ description: 'The bank lines (or report rows) by identity' }),
  with: Identities.meta({ description: 'The settlements (or ledger payments kind:account:id) by identity' }),
  pair: z.enum(['bank-settlement', 'provider-ledger']).optional(),
  note: Text(1000).meta({ description: 'Why (required)' }),
});
export const MatchParams = z.object({ id: IdParam });
export const UnmatchBody = z.strictObject({ note: Text(1000).meta({ description: 'Why (required)' }) });
export const MatchResponse = MatchOut;
