/**
 * The README as a newcomer reads it: no link or path pointing outside the repository, and the intent
 * JSON and CSV examples are accepted as they stand by the parsers `payrecon intent record` and
 * `payrecon backfill intents` use.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseIntentsCsv } from '../../src/producers/backfill.ts';
import { parseIntents } from '../../src/producers/intent/input.ts';

const README = readFileSync(resolve(import.meta.dirname, '../../README.md'), 'utf8');

/** The fenced block of `lang` that follows the first line starting with `after`. */
function blockAfter(after: string, lang: string): string {
  const start = README.split('\n').findIndex((l) => l.startsWith(after));
  expect(start, `README line starting with ${after}`).toBeGreaterThanOrEqual(0);
  const rest = README.split('\n').slice(start).join('\n');
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(rest);
  expect(m, `a ${lang} block after ${after}`).not.toBeNull();
  return m![1]!;
}

describe('README', () => {
  it('links nothing outside the repository', () => {
    const targets = [...README.matchAll(/\]\(([^)]+)\)/g)].map((m) => m[1]!);
    expect(targets.filter((t) => /^(\.\.\/|\/|[a-z]+:)/i.test(t))).toEqual([]);
    expect(README).not.toMatch(/`\.\.\/|\/work\/|shared\/design/);
  });

  it('its intent JSON example is accepted', () => {
    const parsed = parseIntents(JSON.parse(blockAfter('JSON (`payrecon intent record', 'json')), ['sandbox']);
    expect(parsed.ok ? parsed.intents.map((i) => [i.operation, i.amount]) : parsed.issues).toEqual([
      ['deposit', 10050n],
      ['refund', 2000n],
    ]);
  });

  it('its intent CSV example is accepted', () => {
    const parsed = parseIntentsCsv(blockAfter('CSV (`payrecon backfill intents', 'csv'), ['sandbox']);
    expect(parsed.ok ? parsed.intents.map((i) => [i.operation, i.amount]) : parsed.issues).toEqual([
      ['deposit', 25000n],
      ['cashout', 7525n],
    ]);
  });

  it('names a Node version the engines field allows', () => {
    const pkg = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../package.json'), 'utf8')) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe('>=20.18');
    expect(README).toContain('Node.js 20.18 or later');
  });
});
