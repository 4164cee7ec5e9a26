/**
 * `npm run chaos`: the chaos soak at full size (CHAOS_ENTITIES, default 100,000; test/chaos/soak.ts). Prints
 * its figures, writes them into the "Chaos soak" section of docs/reliability.md (replacing the previous run's),
 * and exits non-zero when an end condition does not hold.
 *
 * The creations are spread over the first CHAOS_CREATE_OVER_HOURS provider hours (default 168, seven of
 * the ten days; 0 creates them all before the clock starts), so about a day's worth of entities is open at
 * once, as at a merchant. Polling runs on real time while ten provider days pass in minutes: the poller
 * reads every non-final entity at most every CHAOS_POLL_MAX_DELAY_SECONDS (default 5), and re-checks
 * COMPLETED cashouts and refunds every CHAOS_COMPLETED_RECHECK_SECONDS (default one second per 250
 * entities, at least the former): intermediate catch-ups do not wait for a COMPLETED turned REJECTED, so
 * only the last catch-up waits for that re-check. CHAOS_TRAFFIC_RATE: creations per second while a provider
 * hour's share is created (default 300). The poller works in rounds that end with their slowest call (a
 * hanging call and its retry take seconds): CHAOS_POLL_CONCURRENCY (default 64) and CHAOS_POLL_BATCH_SIZE
 * (default 2,000), leased for 10 s. Each catch-up waits for the poller to go round the open entities once
 * (a dropped webhook's status is read by a poll), so the run's time grows with the entities open at once.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { join } from 'node:path';
import { describeFigures, failedChecks, ISSUE_FAULT_PLAN, runSoak, type SoakFigures } from './soak.ts';

const entities = Number(process.env.CHAOS_ENTITIES ?? 100_000);
if (!Number.isInteger(entities) || entities < 100) {
  process.stderr.write('CHAOS_ENTITIES: must be an integer of at least 100\n');
  process.exit(2);
}
const maxDelay = Number(process.env.CHAOS_POLL_MAX_DELAY_SECONDS ?? 5);
const polling = {
  firstDelaySeconds: 1,
  maxDelaySeconds: maxDelay,
  completedRecheckSeconds: Number(
    process.env.CHAOS_COMPLETED_RECHECK_SECONDS ?? Math.max(maxDelay, Math.round(entities / 250)),
  ),
};
const trafficRate = Number(process.env.CHAOS_TRAFFIC_RATE ?? 300);
const createOverHours = Number(process.env.CHAOS_CREATE_OVER_HOURS ?? 168);
const poller = {
  concurrency: Number(process.env.CHAOS_POLL_CONCURRENCY ?? 64),
  batchSize: Number(process.env.CHAOS_POLL_BATCH_SIZE ?? 2_000),
  leaseSeconds: 10,
};
const plan = ISSUE_FAULT_PLAN;

const loadAtStart = loadavg();
const figures = await runSoak({
  entities,
  plan,
  polling,
  trafficRate,
  createOverHours,
  poller,
  catchUpMs: Math.max(240_000, entities * 20),
  log: (line) => process.stdout.write(`${line}\n`),
});
const failed = failedChecks(figures, plan);
process.stdout.write(`${describeFigures(figures).join('\n')}\n`);
process.stdout.write(failed.length === 0 ? 'chaos: passed\n' : `chaos: FAILED\n  ${failed.join('\n  ')}\n`);

const path = join(import.meta.dirname, '../../docs/reliability.md');
writeFileSync(path, withSection(readFileSync(path, 'utf8'), section(figures, failed)));
process.stdout.write(`chaos: figures written to ${path}\n`);
process.exit(failed.length === 0 ? 0 : 1);

function n(x: number): string {
  return x.toLocaleString('en-US');
}

function describeLatency(l: SoakFigures['lateRejections']['reversalLatency']['all']): string {
  return `${n(l.count)}: p50 ${l.wallSeconds.p50} s (${n(l.providerMinutes.p50)} provider min), max ${l.wallSeconds.max} s (${n(l.providerMinutes.max)} provider min)`;
}

function section(f: SoakFigures, failed: string[]): string {
  const load = (xs: number[]) => xs.map((x) => x.toFixed(1)).join(' / ');
  const pct = (x: number) => `${Math.round(x * 1000) / 10}%`;
  const currencies = [
    ...new Set(Object.values(f.entities.byKindAndCurrency).flatMap((r) => Object.keys(r))),
  ].sort();
  const kindRows = Object.entries(f.entities.byKindAndCurrency).map(
    ([kind, row]) =>
      `| ${kind} | ${currencies.map((c) => n(row[c] ?? 0)).join(' | ')} | ${n(Object.values(row).reduce((s, x) => s + x, 0))} |`,
  );
  const lines = [
    `## Chaos soak (\`npm run chaos\`; \`test/chaos/\`, 2,000 entities in \`npm test\`)`,
    '',
    `Last run ${new Date().toISOString().slice(0, 10)}: ${n(f.entities.total)} entities${
      entities < 100_000
        ? ` (CHAOS_ENTITIES=${n(entities)}; 100,000 entities take about 40 minutes here)`
        : ''
    }, ${cpus().length} vCPU, ${Math.round(totalmem() / 2 ** 30)} GiB, Node.js ${process.versions.node}; ` +
      `load average (1 / 5 / 15 min) ${load(loadAtStart)} at the start, ${load(loadavg())} at the end. ` +
      `Ten provider days on a manual clock; the reconciler (\`payrecon reconcile\`) and the broker (\`payrecon broker\`) ` +
      `run as their own processes, PostgreSQL is embedded; the creations spread over the first ${createOverHours} provider hours ` +
      `(${n(trafficRate)}/s asked of the traffic generator while an hour's share is created); ` +
      `polling every ${polling.maxDelaySeconds} s at most, COMPLETED cashouts and ` +
      `refunds and CANCELLED deposits re-checked every ${polling.completedRecheckSeconds} s, ${poller.concurrency} calls in flight in rounds of ${n(poller.batchSize)}. ` +
      `Faults: provider ${pct(plan.provider.errorRate)} 5xx and ${pct(plan.provider.hangRate)} hanging calls on every ` +
      `endpoint, bursts of ${pct(plan.rateLimitBursts.rate)} 429; webhooks ${pct(plan.webhooks.duplicateRate)} duplicated, ` +
      `${pct(plan.webhooks.reorderRate)} reordered, ${pct(plan.webhooks.dropRate)} dropped; ` +
      `${pct(plan.lateRejection.cashoutRate)} of completed cashouts and refunds rejected two provider days later.`,
    '',
    `| entities | ${currencies.join(' | ')} | total |`,
    `|---|${currencies.map(() => '---:').join('|')}|---:|`,
    ...kindRows,
    '',
    '| figure | value |',
    '|---|---|',
    `| webhooks | ${n(f.webhooks.notifications)} notifications: ${n(f.webhooks.sent)} sent, ${n(f.webhooks.duplicated)} duplicated, ${n(f.webhooks.reordered)} reordered, ${n(f.webhooks.dropped)} dropped; ${n(f.webhooks.failedAttempts)} attempts failed and retried |`,
    `| provider faults served | ${n(f.provider.errors5xx)} 5xx, ${n(f.provider.hangs)} hangs, ${n(f.provider.rateLimited429)} 429 of ${n(f.provider.calls)} calls |`,
    ...f.events.map(
      (e) =>
        `| ${e.what} | provider hour ${e.providerHour}, ${e.atSeconds} s into the run${e.what.startsWith('429') ? '' : `, ${e.downSeconds} s down`} |`,
    ),
    `| dropped webhooks recovered | ${n(f.droppedRecovery.recoveredByPolling)} by polling, ${n(f.droppedRecovery.seenThroughOtherWebhook)} read through another webhook, ${n(f.droppedRecovery.supersededUnread)} superseded before anyone could read them (no money moved), ${n(f.droppedRecovery.unrecovered)} unrecovered |`,
    `| late completions (the provider's late payments) | ${n(f.lateCompletions.atProvider)} at the provider (${n(f.lateCompletions.fromExpired)} from EXPIRED, ${n(f.lateCompletions.fromCancelled)} from CANCELLED), ${n(f.lateCompletions.exceptions)} LATE_COMPLETION exceptions, ${n(f.lateCompletions.missing.length)} without one; first read by ${Object.entries(
      f.lateCompletions.bySource,
    )
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', ')} |`,
    `| late completion to the ledger's reading, for those first read by a poll | ${describeLatency(f.lateCompletions.learntByPolling)} |`,
    `| other documented moves | ${n(f.moves.expiredToCancelled)} EXPIRED deposits turned CANCELLED; ${n(f.moves.lateRejected826)} late-rejected cashouts with code 826 (${n(f.moves.rejectionCodeMismatched.length)} without 826 in the ledger); cashouts by bank_code stored ${Object.entries(
      f.moves.bankCodeForms,
    )
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', ')} (${n(f.moves.bankCodeNotKept)} stored otherwise than sent) |`,
    `| late rejections | ${n(f.lateRejections.atProvider)} at the provider, ${n(f.lateRejections.exceptions)} exceptions, ${n(f.lateRejections.alertsDelivered)} alerts delivered, ${n(f.lateRejections.duplicateAlerts)} twice |`,
    `| late rejection to the ledger's reversal | all ${describeLatency(f.lateRejections.reversalLatency.all)}; found by the re-check ${describeLatency(f.lateRejections.reversalLatency.learntByPolling)}; first read by ${Object.entries(
      f.lateRejections.reversalLatency.bySource,
    )
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', ')} |`,
    `| exceptions by type | ${Object.entries(f.exceptionsByType)
      .map(([k, c]) => `${k} ${n(c)}`)
      .join(', ')} |`,
    `| alerts at the webhook sink (severity high and up) | ${n(f.alerts.delivered)}: ${Object.entries(
      f.alerts.byType,
    )
      .map(([t, c]) => `${t} ${n(c)}`)
      .join(
        ', ',
      )}; ${n(f.alerts.duplicateIds)} alert ids twice, ${n(f.alerts.repeatedExceptions.length)} exceptions alerted twice |`,
    `| postings | ${n(f.ledger.postings)} in ${n(f.ledger.journalEntries)} journal entries; ${n(f.ledger.duplicateIdempotencyKeys)} duplicate idempotency keys |`,
    `| observations, intents | ${n(f.ledger.observations)} (${n(f.ledger.duplicateObservations)} twice), ${n(f.ledger.intents)} |`,
    `| ground-truth diff | ${n(f.ledger.groundTruthDiff)} cells (account, currency, book account; \`available\` less what was settled, the cash leg included); ${n(f.ledger.statusDiff)} entity statuses |`,
    ...cashRows(f.cash),
    `| verify | ${f.ledger.verifyFailures.length} failures; \`payrecon db verify\` exit ${f.ledger.verifyCli.exitCode}: ${f.ledger.verifyCli.output} |`,
    `| dead-lettered | ${n(f.deadLettered)} |`,
    `| secrets scan | ${n(f.secrets.hits)} hits in ${n(f.secrets.stats.logLines)} log lines, ${n(f.secrets.stats.tables)} tables, ${n(f.secrets.stats.topics)} topics (${n(f.secrets.stats.messages)} messages), ${n(f.secrets.stats.files)} files of workbooks and CSVs; ${n(f.secrets.wireSignatures)} sampled wire signatures among the known secrets |`,
    `| wall time | ${n(f.wallSeconds)} s (final checks, workbooks and the secrets scan included); ${n(f.eventsPerSecond)} observations and intents booked per second of it; ${n(f.topicMessages)} messages on the topics |`,
    '',
    failed.length === 0 ? 'Result: every end condition held.' : `Result: FAILED — ${failed.join('; ')}.`,
    '',
  ];
  return lines.join('\n');
}

function cashRows(c: SoakFigures['cash']): string[] {
  const pairs = (o: Record<string, number>) =>
    Object.entries(o)
      .map(([k, v]) => `${k} ${n(v)}`)
      .join(', ') || 'none';
  const s = c.settlements;
  return [
    `| settlements | ${n(s.atSandbox)} made by the sandbox (${n(s.converted)} converted into BRL; ${n(s.carriedOver)} balances carried over instead), ${n(s.reported)} in an imported settlement report, ${n(s.booked)} booked, each once |`,
    `| settlement fetch (the job, ticked on the provider's clock) | ${n(c.fetch.ticks)} ticks, ${n(c.fetch.ran)} runs (${c.fetch.seconds.total} s in all, the longest ${c.fetch.seconds.max} s), ${n(c.fetch.failed)} failed and fetched again at the next tick${c.fetch.failures.length ? ` (${c.fetch.failures.join('; ')})` : ''}, ${n(c.fetch.overlapped)} skipped while the previous run went on; ${n(c.fetch.imports)} files imported, ${n(c.fetch.newLines)} new lines, ${n(c.fetch.refused.length)} refused; the last fetch of every file when quiet: ${n(c.finalFetch.files)} files, ${n(c.finalFetch.newLines)} new lines |`,
    `| bank | ${n(c.statements)} statements imported up to ${c.lastStatementDay}, ${n(c.bankLines)} lines, ${n(c.matchedBankLines)} matched; live matches by rule: ${pairs(c.matchesByRule)} |`,
    `| planted bank anomalies (up to the last statement day) | ${pairs(c.anomalies)} |`,
    `| matching exceptions | expected from the sandbox's records ${pairs(c.exceptions.expected)}; open ${pairs(c.exceptions.open)}; ${n(c.exceptions.missing.length)} missing, ${n(c.exceptions.unexpected.length)} unexpected |`,
    `| the provider's balance | ${n(c.balanceChecks.checked)} merchant account and currency checks at the end (each at its latest cut-off), ${n(c.balanceChecks.differing.length)} differ; ${n(c.balanceChecks.driftsRaised)} PROVIDER_BALANCE_DRIFT raised in the whole run |`,
    `| cash leg | ${n(c.cells)} cells (settlements in transit, settlement fees, fx_conversion, bank fees, bank accounts) against the sandbox's records, ${n(c.cellDiff.length)} differ; ${n(c.doubled.length)} settlements, lines or matches booked or matched twice |`,
    ...c.bankProof.map(
      (p) =>
        `| bank proof ${p.bankAccount} | statement closing ${p.closing} = opening ${p.opening} (before the sandbox's first entry) + ledger \`bank:\` ${p.ledger} + lines no rule matches ${p.unmatched}: ${p.explained ? 'holds' : 'does not hold'} |`,
    ),
  ];
}

/**
 * Replaces the generated part of the "## Chaos soak" section (its heading through its "Result:" line),
 * keeping the history written under it; or adds the section before "## Not yet built".
 */
function withSection(doc: string, text: string): string {
  const start = doc.search(/^## Chaos soak/m);
  if (start >= 0) {
    const result = /^Result: .*$/m.exec(doc.slice(start));
    const next = doc.slice(start + 1).search(/^## /m);
    // The generated part ends at its "Result:" line, when that line is still inside the section.
    if (result && (next < 0 || result.index <= next)) {
      return doc.slice(0, start) + text.trimEnd() + doc.slice(start + result.index + result[0].length);
    }
    return doc.slice(0, start) + text + (next >= 0 ? `\n${doc.slice(start + 1 + next)}` : '');
  }
  const before = doc.search(/^## Not yet built/m);
  if (before < 0) return `${doc.trimEnd()}\n\n${text}`;
  return `${doc.slice(0, before)}${text}\n${doc.slice(before)}`;
}
