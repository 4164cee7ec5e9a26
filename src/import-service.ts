/**
 * The one import of a file, whoever brings it: `payrecon import`, the page's upload, `POST
 * /api/v1/imports` and the fetch job all call `importFile`. It reads and checks the file
 * (src/imports/read-file.ts), then records it in one transaction (src/db/imports/service.ts), each line
 * once under its identity, and answers what `payrecon import --json` prints. A refused file throws its
 * ImportRefusal and nothing is recorded.
 */
import type { Config } from './config.ts';
import { matchingOptionsFrom } from './config-rules.ts';
import { recordImport } from './db/imports/service.ts';
import { matchSummary, runMatching } from './db/matching/service.ts';
import type { Db } from './db/schema.ts';
import type { ImportFileFn, ImportOutcome, ImportRequest, ImportSummary } from './domain/imports.ts';
import type { MatchSummary } from './domain/matching.ts';
import type { KnownBankAccount } from './imports/bank-accounts.ts';
import type { Profile } from './imports/profile.ts';
import { namedProfile, type ReadImport, readImportFile } from './imports/read-file.ts';

export interface ImportDeps {
  /**
   * The database, or how to open it once the file is read and checked (the command opens none for a
   * refused file); null: dry runs only.
   */
  db: Db | (() => Promise<Db>) | null;
  bankAccounts: readonly KnownBankAccount[];
  /** Profiles the requests may name besides the built-in ones (PAYRECON_IMPORT_PROFILES_DIR). */
  profiles?: readonly Profile[];
  /** Matches the lines once new ones are recorded (`matcherFrom`); absent: not matched here. */
  match?: Matcher;
}

/**
 * A matching run over the database with the bank accounts the import used, keeping its result on the
 * import `importId` (when given) in the run's own transaction.
 */
export type Matcher = (
  db: Db,
  bankAccounts: readonly KnownBankAccount[],
  importId?: string,
) => Promise<MatchSummary>;

/** Matching with the configured rules and settings (src/db/matching/service.ts). */
export function matcherFrom(config: Config): Matcher {
  const { rules, ...options } = matchingOptionsFrom(config);
  return async (db, bankAccounts, importId) =>
    matchSummary(
      await runMatching(db, rules, {
        ...options,
        bankAccounts,
        ...(importId === undefined ? {} : { importId }),
      }),
    );
}

export type ImportFileRequest = Omit<ImportRequest, 'profile'> & {
  /** A profile read from a file, or a built-in profile's name. */
  profile?: Profile | string;
  /** How refusals name the file (the command: the path given); default the file name. */
  source?: string;
};

function summaryOf(
  file: ReadImport,
  fresh: { lines: number | null; statements: (number | null)[] },
): ImportSummary {
  if (file.kind === 'bank-statement') {
    return {
      statements: file.statements.map((s, i) => ({
        account: s.bankAccount,
        currency: s.currency,
        opening: s.opening,
        closing: s.closing,
        credits: s.credits,
        debits: s.debits,
        booked: s.booked,
        pending: s.pending,
        new: fresh.statements[i] ?? null,
      })),
    };
  }
  return { kind: file.kind, rows: file.rows.length, new: fresh.lines };
}

export async function importFile(deps: ImportDeps, request: ImportFileRequest): Promise<ImportOutcome> {
  const source = request.source ?? request.fileName;
  let profile: Profile | undefined;
  if (typeof request.profile === 'string') {
    const named = namedProfile(source, request.profile, deps.profiles);
    if (!named.ok) throw named.refusal;
    profile = named.value;
  } else {
    profile = request.profile;
  }
  const read = await readImportFile(request.kind, request.fileName, request.bytes, {
    source,
    bankAccounts: deps.bankAccounts,
    ...(profile === undefined ? {} : { profile }),
    ...(request.account === undefined ? {} : { account: request.account }),
  });
  if (!read.ok) throw read.refusal;
  const file = read.value;
  const base = { kind: file.kind, fileName: file.fileName };
  if (request.dryRun) {
    const statements = file.kind === 'bank-statement' ? file.statements.map(() => null) : [];
    return { ...base, id: null, summary: summaryOf(file, { lines: null, statements }), matching: null };
  }
  if (deps.db === null) throw new Error('an import to record needs a database');
  const db = typeof deps.db === 'function' ? await deps.db() : deps.db;
  const recorded = await recordImport(db, { ...file, importedBy: request.user });
  // New lines are matched at once, the run's result kept on the import: the page, the API, the job and
  // the command see the same result. A run that fails leaves the import recorded without one: its lines
  // are in no match, so the next run takes them.
  let matching: MatchSummary | null = null;
  let matchingError: string | undefined;
  if (recorded.new > 0 && deps.match !== undefined) {
    try {
      matching = await deps.match(db, deps.bankAccounts, recorded.id);
    } catch (err) {
      matchingError = err instanceof Error ? err.message : String(err);
    }
  }
  return {
    ...base,
    id: recorded.id,
    matching,
    ...(matchingError === undefined ? {} : { matchingError }),
    summary: summaryOf(file, {
      lines: recorded.new,
      statements: recorded.statements.map((s) => s.new),
    }),
  };
}

/** `importFile` over one database and the configured bank accounts, as the page, the API and the job take it. */
export function importService(
  db: Db,
  bankAccounts: readonly KnownBankAccount[],
  profiles: readonly Profile[] = [],
  match?: Matcher,
): ImportFileFn {
  return (request) =>
    importFile({ db, bankAccounts, profiles, ...(match === undefined ? {} : { match }) }, request);
}
