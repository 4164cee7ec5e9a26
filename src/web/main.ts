/**
 * `payrecon web`: the finance page on its own (the single `payrecon up` server mounts `webRoutes`
 * instead), with the JSON API beside it when the CLI passes it, and `payrecon web hash-password`, which reads a password from stdin and prints the scrypt
 * hash to put in PAYRECON_WEB_USERS.
 */
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { FastifyInstance } from 'fastify';
import { type Config, loadConfig } from '../config.ts';
import { createDb, migrateToLatest, pingDatabase } from '../db/connection.ts';
import { balances } from '../db/read-models/balances.ts';
import { exceptionFigures, pollBacklog } from '../db/read-models/metrics.ts';
import type { Db } from '../db/schema.ts';
import { AppError } from '../domain/errors.ts';
import { type Logger, logger } from '../logger.ts';
import { createMetrics } from '../metrics.ts';
import { ReportRunner } from '../reports/runs.ts';
import { buildWebApp } from './app.ts';
import { hashPassword } from './auth.ts';
import { opsRoutes } from './ops.ts';
import { ledgerWebServices } from './services.ts';
import { resolveSessionSecret } from './session-secret.ts';

async function readPassword(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('Password (input is not hidden; pipe it to avoid echo): ');
  const rl = createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    rl.close();
    return line;
  }
  return '';
}

export async function runHashPasswordCli(): Promise<void> {
  const password = await readPassword();
  if (password.length < 8) throw new AppError('VALIDATION_FAILED', 'password: at least 8 characters');
  process.stdout.write(`${await hashPassword(password)}\n`);
}

export interface WebCliOptions {
  host?: string;
  port?: string;
  databaseUrl?: string;
}

/** The command's database (chosen by the CLI: option, environment, running instance, embedded). */
export type OpenDatabase = () => Promise<{ url: string; stop(): Promise<void> }>;

/**
 * Mounts more routes on the page's server (the CLI passes the JSON API: adapters do not import each
 * other, so `web` does not import `api`).
 */
export type MountBeside = (
  app: FastifyInstance,
  deps: { db: Db; reports: ReportRunner; config: Config; logger: Logger },
) => Promise<void>;

export async function runWebCli(
  opts: WebCliOptions,
  openDatabase: OpenDatabase,
  beside?: MountBeside,
): Promise<void> {
  const config = loadConfig();
  if (config.web.users.length === 0) {
    throw new AppError(
      'CONFIG_INVALID',
      'PAYRECON_WEB_USERS: no users (create a hash with `payrecon web hash-password`)',
    );
  }
  const log = logger.child({ module: 'web' });
  const database = await openDatabase();
  const db = createDb(database.url);
  await migrateToLatest(db);
  const runner = new ReportRunner({
    db,
    dir: join(config.dataDir, 'reports'),
    timeZone: config.jobs.timeZone,
    cutoff: config.jobs.settlementCutoff,
    publicUrl: config.web.publicUrl,
    exceptionSla: config.exceptions.sla,
    logger: log,
  });
  await runner.failAbandoned();
  const app = await buildWebApp({
    users: config.web.users,
    sessionSecret: await resolveSessionSecret(config.web.sessionSecret, config.dataDir),
    timeZone: config.jobs.timeZone,
    services: ledgerWebServices(db, runner, config.exceptions.sla),
    logger: log,
  });
  await beside?.(app, { db, reports: runner, config, logger: log });
  // Health and the ledger's metrics (no Kafka here: the database is the one dependency).
  const sla = config.metrics.exceptionSlaMinutes;
  const metrics = createMetrics({
    balances: () => balances(db),
    exceptions: () => exceptionFigures(db, config.exceptions.sla),
    pollBacklog: () => pollBacklog(db),
    exceptionSlaMinutes: sla,
  });
  await app.register(opsRoutes, { metrics, checks: [{ name: 'database', check: () => pingDatabase(db) }] });
  const address = await app.listen({
    host: opts.host ?? config.web.host,
    port: Number(opts.port ?? config.web.port),
  });
  log.info({ address }, 'finance page listening');
  const stop = async () => {
    await app.close();
    await runner.idle();
    await db.destroy();
    await database.stop();
    process.stdout.write('payrecon: stopped\n');
    process.exit(0);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
