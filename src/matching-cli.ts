/**
 * `payrecon match [--json]`: runs matching once (src/db/matching/service.ts) with the configured rules
 * and prints the new matches by rule, what stays unmatched and the exceptions raised and resolved.
 * `--line ID... --with ID... --note TEXT` matches by hand; `--undo MATCH --note TEXT` ends a match; both
 * act as a configured page user with the work-exceptions permission (`--user`, its password checked by
 * src/cli-auth.ts) and record who and why.
 * `payrecon import` runs the same after it recorded new lines (`matchAfterImport`).
 */
import { UsageError } from './cli-errors.ts';
import { loadConfig } from './config.ts';
import { matchingOptionsFrom } from './config-rules.ts';
import { matchByHand, unmatchByHand } from './db/matching/by-hand.ts';
import { type MatchingRun, matchSummary, runMatching } from './db/matching/service.ts';
import type { Db } from './db/schema.ts';
import { MATCH_PAIRS, type MatchPair, type MatchSummary } from './domain/matching.ts';
import { type OpenDatabase, openDatabaseInfrastructure } from './infrastructure.ts';
import { logger as rootLogger } from './logger.ts';

export interface MatchCliOptions {
  json?: boolean;
  /** A match by hand: the left side's line identities (bank lines, report rows) ... */
  line?: string[];
  /** ... and the right side's (settlement identities, or `kind:account:id` of ledger payments). */
  with?: string[];
  pair?: string;
  /** Unmatch: the match to end. */
  undo?: string;
  note?: string;
  /**
   * Who matches or unmatches by hand: the configured page user `--user` names, authenticated, with the
   * work-exceptions permission (src/cli-auth.ts); asked only for a match by hand or an unmatch.
   */
  actingUser?: () => Promise<string>;
}

/** What the options ask for: a run of the rules, a match by hand, or an unmatch; checked before connecting. */
function checkOptions(opts: MatchCliOptions): 'run' | 'manual' | 'undo' {
  const manual = opts.line !== undefined || opts.with !== undefined;
  if (manual && opts.undo !== undefined)
    throw new UsageError('--undo', 'must not be given with --line or --with');
  if (manual) {
    if (!opts.line?.length || !opts.with?.length)
      throw new UsageError('--line, --with', 'must be given together');
    if (opts.pair !== undefined && !(MATCH_PAIRS as readonly string[]).includes(opts.pair)) {
      throw new UsageError('--pair', `must be one of ${MATCH_PAIRS.join(', ')}`);
    }
  } else if (opts.pair !== undefined) throw new UsageError('--pair', 'needs --line and --with');
  if (opts.undo !== undefined && !/^\d{1,18}$/.test(opts.undo))
    throw new UsageError('--undo', 'must be a match id');
  if ((manual || opts.undo !== undefined) && (opts.note === undefined || opts.note.trim() === '')) {
    throw new UsageError('--note', 'is required: say why');
  }
  if (!manual && opts.undo === undefined && opts.note !== undefined) {
    throw new UsageError('--note', 'needs --line and --with, or --undo');
  }
  return manual ? 'manual' : opts.undo !== undefined ? 'undo' : 'run';
}

/** Runs matching with the configuration's rules and settings. */
export function matchWithConfig(db: Db, config: ReturnType<typeof loadConfig>): Promise<MatchingRun> {
  const { rules, ...options } = matchingOptionsFrom(config);
  return runMatching(db, rules, options);
}

export function printMatchRun(run: MatchSummary, json: boolean, prefix = ''): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(run)}\n`);
    return;
  }
  const rules = Object.entries(run.matched).sort(([a], [b]) => (a < b ? -1 : 1));
  const matched = rules.length === 0 ? 'nothing new' : rules.map(([r, n]) => `${r} ${n}`).join(', ');
  const raised = Object.entries(run.exceptions).sort(([a], [b]) => (a < b ? -1 : 1));
  process.stdout.write(
    `${prefix}matched: ${matched}; unmatched: ${run.unmatched.bankLines} bank lines, ` +
      `${run.unmatched.settlements} settlements, ${run.unmatched.reportRows} report rows; ` +
      `exceptions: ${raised.length === 0 ? 'none' : raised.map(([t, n]) => `${t} ${n}`).join(', ')}` +
      `, ${run.resolved} resolved\n`,
  );
}

export async function runMatchCli(opts: MatchCliOptions, openDatabase: OpenDatabase): Promise<void> {
  const what = checkOptions(opts);
  const config = loadConfig();
  let by = 'payrecon';
  if (what !== 'run') {
    if (!opts.actingUser) throw new UsageError('--user', 'a match by hand needs an authenticated user');
    by = await opts.actingUser();
  }
  const logger = rootLogger.child({ module: 'match' }, { level: 'silent' });
  const infra = await openDatabaseInfrastructure(config, openDatabase, {
    schema: 'require',
    poolSize: 2,
    logger,
  });
  try {
    if (what === 'manual') {
      const id = await matchByHand(infra.db, {
        pair: (opts.pair ?? 'bank-settlement') as MatchPair,
        left: opts.line!,
        right: opts.with!,
        by,
        note: opts.note!,
        bankAccounts: config.bankAccounts,
      });
      process.stdout.write(
        opts.json ? `${JSON.stringify({ matchId: id })}\n` : `match ${id}: made by ${by}\n`,
      );
    } else if (what === 'undo') {
      const ended = await unmatchByHand(infra.db, { matchId: opts.undo!, by, note: opts.note! });
      process.stdout.write(
        opts.json
          ? `${JSON.stringify({ matchId: ended.id, rule: ended.rule, lines: ended.members.length })}\n`
          : `match ${ended.id} (${ended.rule}): ended by ${by}, ${ended.members.length} lines unmatched\n`,
      );
    } else printMatchRun(matchSummary(await matchWithConfig(infra.db, config)), opts.json === true);
  } finally {
    await infra.lifecycle.stopAll();
  }
}
