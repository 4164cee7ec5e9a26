/**
 * What the CLI commands that publish (`payrecon intent record`, `payrecon backfill ...`) run on: config,
 * an acknowledged Kafka publisher and the provider client's settings, opened by the CLI's composition;
 * and their error path, one line on stderr.
 */
import { describeFailure } from '../cli-errors.ts';
import type { Config } from '../config.ts';
import type { Publisher } from '../events/kafka.ts';
import type { ProviderClientOptions } from '../provider/client.ts';

export interface Connected {
  config: Config;
  /** DATABASE_URL, else the running `payrecon up`'s database, else null. */
  databaseUrl: string | null;
  /** The running `payrecon up`'s sandbox (`endpoints.json`: api, card api, control), else null. */
  sandbox: Readonly<Record<string, string>> | null;
  publisher: Publisher;
  /** The provider client's timeouts and retries, as every command has them. */
  providerOptions: ProviderClientOptions;
  close(): Promise<void>;
}

/** Opens the connection of a publishing command; the CLI gives it (src/infrastructure.ts `connectPublisher`). */
export type ConnectPublisher = (clientId: string) => Promise<Connected>;

/** Runs a CLI action: an AppError prints as one line on stderr and exits 1. */
export async function runCliAction(action: () => Promise<void>): Promise<void> {
  try {
    await action();
  } catch (err) {
    // The one error path's line (src/cli-errors.ts); a bad input file is not a usage error: exit 1.
    process.stderr.write(`payrecon: ${describeFailure(err).message}\n`);
    process.exitCode = 1;
  }
}
