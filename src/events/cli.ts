/**
 * `payrecon topics plan` and `payrecon topics apply`: the topic plan (src/events/topic-plan.ts) against
 * the cluster in KAFKA_BROKERS, through the same client settings as every part (TLS, SASL).
 *
 * `plan` prints one line per topic (as planned, missing, partitions to raise, or refused with the
 * reason) and changes nothing. `apply` creates what is missing and raises partition counts, then prints
 * what it did and what it refused. Exit code 0 when the cluster matches the plan afterwards, 1 when a
 * difference remains (refused or failed); a configuration problem is thrown for the CLI's error path.
 */
import { loadConfig } from '../config.ts';
import { AppError } from '../domain/errors.ts';
import { logger, setLogLevel } from '../logger.ts';
import { connectAdmin } from './connect.ts';
import { createKafka } from './kafka.ts';
import { applyTopicPlan, describeDiff, diffTopicPlan, plannedTopics } from './topic-plan.ts';

export interface TopicsCliIo {
  out(line: string): void;
}

const stdout: TopicsCliIo = { out: (line) => process.stdout.write(`${line}\n`) };

/**
 * Runs the command and answers its exit code; a configuration, credential or certificate problem is
 * thrown (AppError CONFIG_INVALID: the CLI prints its one line and exits 2).
 */
export async function runTopicsCli(
  command: 'plan' | 'apply',
  io: TopicsCliIo = stdout,
  env?: NodeJS.ProcessEnv,
): Promise<number> {
  return topics(command, io, env);
}

async function topics(
  command: 'plan' | 'apply',
  io: TopicsCliIo,
  env: NodeJS.ProcessEnv | undefined,
): Promise<number> {
  const config = loadConfig(env);
  setLogLevel(config.logLevel);
  const brokers = config.kafka.brokers;
  if (!brokers) {
    throw new AppError(
      'CONFIG_INVALID',
      'KAFKA_BROKERS: must be set (the topic plan is for a running cluster)',
    );
  }
  const plan = plannedTopics(config.kafka.topics);
  const kafka = createKafka({
    brokers: [...brokers],
    clientId: config.kafka.clientId,
    security: config.kafka.security,
    retries: 2,
    logger,
  });
  const admin = await connectAdmin(kafka, brokers, config.kafka.security);
  try {
    const diffs = await diffTopicPlan(admin, plan);
    if (command === 'plan') {
      for (const d of diffs) for (const line of describeDiff(d)) io.out(line);
      const changes = diffs.filter((d) => d.action !== 'none').length;
      const refused = diffs.reduce((n, d) => n + d.refused.length, 0);
      io.out(
        `plan: ${plan.length} topics, ${changes} to change by apply, ${refused} difference(s) apply refuses`,
      );
      return changes + refused === 0 ? 0 : 1;
    }
    const result = await applyTopicPlan(admin, diffs);
    for (const name of result.created) io.out(`${name}: created`);
    for (const r of result.raised) io.out(`${r.name}: partitions raised ${r.from} -> ${r.to}`);
    for (const f of result.failed) io.out(`${f.name}: failed: ${f.reason}`);
    let refused = 0;
    for (const d of diffs) {
      for (const r of d.refused) {
        io.out(`${d.planned.name}: refused: ${r}`);
        refused++;
      }
    }
    io.out(
      `apply: ${result.created.length} created, ${result.raised.length} raised, ${refused} refused, ${result.failed.length} failed`,
    );
    return refused + result.failed.length === 0 ? 0 : 1;
  } finally {
    await admin.disconnect();
  }
}
