/**
 * `payrecon registry`: runs the embedded schema registry in the foreground until SIGINT or SIGTERM.
 * Prints one line with the URL (and so the chosen port when `--port 0`).
 */
import { startRegistry } from './registry.ts';

export interface RegistryCliOptions {
  host: string;
  port: string;
  dataDir: string;
}

export async function runRegistryCli(opts: RegistryCliOptions): Promise<void> {
  const port = Number(opts.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be an integer between 0 and 65535 (got ${opts.port})`);
  }
  const registry = await startRegistry({ host: opts.host, port, dataDir: opts.dataDir });
  process.stdout.write(`schema registry listening on ${registry.url} (port ${registry.port})\n`);
  const stop = () => {
    registry.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}
