/**
 * The one pino root logger. Modules take `logger.child({ module: 'reconciler' })`. Secrets, passwords,
 * signatures, card numbers and CVVs (the one list: `src/domain/secrets.ts`) are redacted by path wherever
 * they appear in a logged object, up to three levels deep and inside request/response headers.
 *
 * The logger reads no environment: it starts at `info` and the CLI sets the configured level
 * (`config.logLevel`) with `setLogLevel` right after `loadConfig()`, before it imports the areas whose
 * modules create child loggers (a pino child keeps the level it was created with).
 */
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import { SECRET_KEYS } from './domain/secrets.ts';

function redactPaths(): string[] {
  const paths: string[] = [];
  for (const key of SECRET_KEYS) {
    const k = /^[A-Za-z_$][\w$]*$/.test(key) ? key : `["${key}"]`;
    const dot = k.startsWith('[') ? '' : '.';
    paths.push(k, `*${dot}${k}`, `*.*${dot}${k}`, `*.*.*${dot}${k}`);
  }
  for (const h of [
    'authorization',
    'payload-signature',
    'x-login',
    'cookie',
    'Authorization',
    'Payload-Signature',
    'X-Login',
    'Cookie',
  ]) {
    paths.push(`req.headers["${h}"]`, `headers["${h}"]`, `*.headers["${h}"]`);
  }
  return paths;
}

export const REDACT_PATHS: readonly string[] = redactPaths();

export function createLogger(options: LoggerOptions = {}, destination?: DestinationStream): Logger {
  const settings: LoggerOptions = {
    level: 'info',
    ...options,
    redact: { paths: [...REDACT_PATHS], censor: '[redacted]' },
    serializers: { err: pino.stdSerializers.err, ...options.serializers },
  };
  return destination ? pino(settings, destination) : pino(settings);
}

/** Where the root logger writes: JSON lines on stdout, until `useReadableLogs` swaps in pino-pretty. */
let output: { write(line: string): unknown } = pino.destination({ dest: 1, sync: true });
const switchable = { write: (line: string) => output.write(line) } as DestinationStream;

/** The process-wide root logger. */
export const logger: Logger = createLogger({}, switchable);

/**
 * Human-readable log lines (pino-pretty: time, level, message, then the fields) for a person at a
 * terminal; `payrecon up` calls it when stdout is a TTY. Redaction happens before, as for JSON lines.
 */
export async function useReadableLogs(destination: NodeJS.WritableStream = process.stdout): Promise<void> {
  const { default: pretty } = await import('pino-pretty');
  output = pretty({
    colorize: destination === process.stdout && process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    singleLine: true,
    sync: true,
    destination,
  });
}

/** Back to JSON lines on stdout (tests). */
export function useJsonLogs(): void {
  output = pino.destination({ dest: 1, sync: true });
}

/** Sets the root logger's level (from `config.logLevel`); children created afterwards inherit it. */
export function setLogLevel(level: string): void {
  logger.level = level;
}

export type { Logger };
