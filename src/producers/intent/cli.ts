/** `payrecon intent record --file FILE.json`. */
import { readFileSync } from 'node:fs';
import { AppError } from '../../domain/errors.ts';
import { INTENT_TOPIC } from '../../events/topics.ts';
import { parseProviderJson } from '../../provider/json.ts';
import { type ConnectPublisher, runCliAction } from '../connect.ts';
import { issueText, parseIntents } from './input.ts';

/** `payrecon intent record --file FILE.json`: one intent or an array; nothing published if any is invalid. */
export async function runIntentRecordCli(opts: { file: string }, connect: ConnectPublisher): Promise<void> {
  await runCliAction(async () => {
    let body: unknown;
    try {
      body = parseProviderJson(readFileSync(opts.file, 'utf8'));
    } catch (err) {
      throw new AppError(
        'VALIDATION_FAILED',
        `${opts.file}: ${err instanceof Error ? err.message : 'unreadable'}`,
      );
    }
    const connected = await connect('intent');
    try {
      const parsed = parseIntents(
        body,
        connected.config.accounts.length > 0 ? connected.config.accounts.map((a) => a.name) : undefined,
      );
      if (!parsed.ok) {
        throw new AppError('VALIDATION_FAILED', `${opts.file}: ${parsed.issues.map(issueText).join('; ')}`);
      }
      await connected.publisher.publish(
        INTENT_TOPIC,
        parsed.intents.map((value) => ({ value })),
      );
      process.stdout.write(`recorded ${parsed.intents.length} intent(s)\n`);
    } finally {
      await connected.close();
    }
  });
}
