/**
 * `payrecon match [--json]`: runs matching once (src/db/matching/service.ts) with the configured rules
 * and prints the new matches by rule, what stays unmatched and the exceptions raised and resolved.
 * `payrecon import` runs the same after it recorded new lines (`matchAfterImport`).
 */
import { loadConfig } from './config.ts';
import { matchingOptionsFrom } from './config-rules.ts';
import { type MatchingRun, runMatching } from './db/matching/service.ts';
import type { Db } from './db/schema.ts';
import { type OpenDatabase, openDatabaseInfrastructure } from './infrastructure.ts';
import { logger as rootLogger } from './logger.ts';

export interface MatchCliOptions {
  json?: boolean;
}

/** Runs matching with the configuration's rules and settings. */
export function matchWithConfig(db: Db, config: ReturnType<typeof loadConfig>): Promise<MatchingRun> {
  const { rules, ...options } = matchingOptionsFrom(config);
  return runMatching(db, rules, options);
}

/** The run as JSON: counts by rule, unmatched counts, exceptions by type, resolved. */
export function matchSummary(run: MatchingRun) {
  return {
    matched: run.byRule,
    unmatched: run.unmatched,
    exceptions: run.exceptions.raised,
    resolved: run.exceptions.resolved,
  };
}

export function printMatchRun(run: MatchingRun, json: boolean, prefix = ''): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(matchSummary(run))}\n`);
    return;
  }
  const rules = Object.entries(run.byRule).sort(([a], [b]) => (a < b ? -1 : 1));
  const matched = rules.length === 0 ? 'nothing new' : rules.map(([r, n]) => `${r} ${n}`).join(', ');
  const raised = Object.entries(run.exceptions.raised).sort(([a], [b]) => (a < b ? -1 : 1));
  process.stdout.write(
    `${prefix}matched: ${matched}; unmatched: ${run.unmatched.bankLines} bank lines, ` +
      `${run.unmatched.settlements} settlements, ${run.unmatched.reportRows} report rows; ` +
      `exceptions: ${raised.length === 0 ? 'none' : raised.map(([t, n]) => `${t} ${n}`).join(', ')}` +
      `, ${run.exceptions.resolved} resolved\n`,
  );
}

export async function runMatchCli(opts: MatchCliOptions, openDatabase: OpenDatabase): Promise<void> {
  const config = loadConfig();
  const logger = rootLogger.child({ module: 'match' }, { level: 'silent' });
  const infra = await openDatabaseInfrastructure(config, openDatabase, {
    schema: 'require',
    poolSize: 2,
    logger,
  });
  try {
    printMatchRun(await matchWithConfig(infra.db, config), opts.json === true);
  } finally {
    await infra.lifecycle.stopAll();
  }
}
