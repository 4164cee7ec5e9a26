/**
 * The documents a user reads (README.md, BENCHMARKS.md, docs/*.md) against the code: every link and
 * every repository path they name exists, every `payrecon` command they show is one the CLI has, every
 * npm script and environment variable they name is real and configuration.md names every variable of
 * the config, every metric is defined, no development history is left in them, and the intent JSON and
 * CSV examples are accepted by the parsers `payrecon intent record` and `payrecon backfill intents` use.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FILE_VARIANTS } from '../../src/config.ts';
import { parseIntentsCsv } from '../../src/producers/backfill.ts';
import { parseIntents } from '../../src/producers/intent/input.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

const DOCS = ['README.md', 'BENCHMARKS.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)];
const TEXT = new Map(DOCS.map((d) => [d, read(d)]));
const README = TEXT.get('README.md')!;

/**
 * Paths the documents name in the layout src/db and the composition are being reshaped into, not in
 * this tree yet. An entry that exists fails the check: remove it once its path is there, so the list
 * cannot go stale.
 */
/** Inline code spans and fenced blocks of a document, with each block's language. */
function codeOf(doc: string): { inline: string[]; blocks: { lang: string; body: string }[] } {
  const blocks = [...doc.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)].map((m) => ({ lang: m[1]!, body: m[2]! }));
  const prose = doc.replace(/^```\w*\n[\s\S]*?^```/gm, '');
  const inline = [...prose.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
  return { inline, blocks };
}

/** The fenced block of `lang` that follows the first line of `doc` starting with `after`. */
function blockAfter(doc: string, after: string, lang: string): string {
  const start = doc.split('\n').findIndex((l) => l.startsWith(after));
  expect(start, `a line starting with ${after}`).toBeGreaterThanOrEqual(0);
  const rest = doc.split('\n').slice(start).join('\n');
  const m = new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\`\`\``).exec(rest);
  expect(m, `a ${lang} block after ${after}`).not.toBeNull();
  return m![1]!;
}

/** The sub-command names `payrecon <args> --help` lists. */
function commandsOf(args: string[]): string[] {
  const help = execFileSync(process.execPath, [join(ROOT, 'bin/payrecon.mjs'), ...args, '--help'], {
    encoding: 'utf8',
    env: { ...process.env, COLUMNS: '200' },
  });
  const section = help.split(/^Commands:$/m)[1] ?? '';
  return [...section.matchAll(/^ {2}([a-z][\w-]*)/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

describe('the documents', () => {
  it('keep to their length', () => {
    expect(README.split('\n').length).toBeLessThan(200);
    expect(TEXT.get('BENCHMARKS.md')!.split('\n').length).toBeLessThan(400);
  });

  it('carry no development history and point at nothing outside the repository', () => {
    for (const [name, text] of TEXT) {
      expect(text, name).not.toMatch(/\bsessions? \d+|\bsession's\b|\bissues? #?\d+|\bhelper h\d/i);
      expect(text, name).not.toMatch(/ARCHITECTURE\.md|provider-facts|\.\.\/shared|\/work\//);
      // A commit hash: 7 to 40 hex digits with a letter and a digit among them.
      const hashes = [...text.matchAll(/\b[0-9a-f]{7,40}\b/g)]
        .map((m) => m[0])
        .filter((h) => /[a-f]/.test(h) && /\d/.test(h));
      expect(hashes, name).toEqual([]);
    }
  });

  it('link only files that exist', () => {
    for (const [name, text] of TEXT) {
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        expect(target, `${name} links ${target}`).not.toMatch(/^(\/|[a-z]+:)/i);
        const file = target!.replace(/#.*$/, '');
        if (file !== '')
          expect(existsSync(resolve(ROOT, dirname(name), file)), `${name} links ${target}`).toBe(true);
      }
    }
  });

  it('name only repository paths that exist', () => {
    const named = new Set<string>();
    for (const text of TEXT.values()) {
      for (const code of codeOf(text).inline) {
        for (const [path] of code.matchAll(
          /(?:^|(?<=[\s(]))(?:src|test|bench|ops|schemas|scripts|docs|bin|\.ci)\/[\w./-]*/g,
        )) {
          if (!/[<*{]/.test(code)) named.add(path!.replace(/[.,:;]+$/, ''));
        }
      }
    }
    expect(named.size).toBeGreaterThan(50);
    const missing = [...named].filter((p) => !existsSync(join(ROOT, p)));
    expect(missing).toEqual([]);
  });

  it('show only payrecon commands the CLI has', () => {
    const shown = new Map<string, Set<string>>();
    for (const text of TEXT.values()) {
      const { inline, blocks } = codeOf(text);
      const code = [...inline, ...blocks.filter((b) => b.lang === 'sh').map((b) => b.body)];
      for (const c of code) {
        for (const m of c.replaceAll('\\|', '|').matchAll(/\bpayrecon ([a-z][\w|-]*)(?: ([a-z][\w|-]*))?/g)) {
          for (const top of m[1]!.split('|')) {
            const subs = shown.get(top) ?? new Set<string>();
            for (const sub of m[2]?.split('|') ?? []) subs.add(sub);
            shown.set(top, subs);
          }
        }
      }
    }
    const top = commandsOf([]);
    expect([...shown.keys()].filter((c) => !top.includes(c))).toEqual([]);
    for (const [command, subs] of shown) {
      const known = commandsOf([command]);
      // A command without sub-commands takes arguments (`payrecon up --traffic`, `payrecon jobs`).
      if (known.length === 0) continue;
      expect(
        [...subs].filter((s) => !known.includes(s)),
        `payrecon ${command}`,
      ).toEqual([]);
    }
  }, 120_000);

  it('name npm scripts that exist, and BENCHMARKS.md has a section per benchmark', () => {
    const scripts = Object.keys(
      (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts,
    );
    for (const [name, text] of TEXT) {
      for (const [, script] of text.matchAll(/npm run ([\w:]+)/g)) {
        expect(scripts, `${name}: npm run ${script}`).toContain(script);
      }
      for (const [, script] of text.matchAll(/`(bench:\w+)`/g)) expect(scripts, name).toContain(script);
    }
    const benchmarks = TEXT.get('BENCHMARKS.md')!;
    for (const script of scripts.filter((s) => s.startsWith('bench:'))) {
      expect(benchmarks).toMatch(new RegExp(`^## .*\\(\`npm run ${script}\`\\)$`, 'm'));
    }
  });

  it('name the environment variables the config reads, and configuration.md names all of them', () => {
    const schema = /const envSchema = z\.object\(\{([\s\S]*?)^\}\);/m.exec(read('src/config.ts'))![1]!;
    const variables = [...schema.matchAll(/^ {2}([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]!);
    expect(variables.length).toBeGreaterThan(50);
    const known = new Set([
      ...variables,
      ...FILE_VARIANTS.map((v) => `${v}_FILE`),
      'TEST_DATABASE_URL',
      'PAYRECON_REQUIRE_TOOLS',
    ]);
    for (const [name, text] of TEXT) {
      const named = [
        ...text.matchAll(/\b(?:PAYRECON|KAFKA|SCHEMA_REGISTRY|DATABASE)_[A-Z0-9_]*[A-Z0-9]\b/g),
      ].map((m) => m[0]);
      expect(
        named.filter((v) => !known.has(v)),
        name,
      ).toEqual([]);
    }
    const configuration = TEXT.get('docs/configuration.md')!;
    expect(variables.filter((v) => !configuration.includes(`\`${v}\``))).toEqual([]);
  });

  it('name only metrics src/metrics.ts defines', () => {
    const metrics = read('src/metrics.ts');
    const named = new Set(
      [...TEXT.get('docs/operations.md')!.matchAll(/`(payrecon_[a-z_]+[a-z])`/g)].map((m) => m[1]!),
    );
    expect(named.size).toBeGreaterThan(15);
    expect([...named].filter((m) => !metrics.includes(`'${m}'`))).toEqual([]);
  });

  it('give an intent JSON example that is accepted', () => {
    const api = TEXT.get('docs/api.md')!;
    const parsed = parseIntents(JSON.parse(blockAfter(api, 'JSON (`payrecon intent record', 'json')), [
      'sandbox',
    ]);
    expect(parsed.ok ? parsed.intents.map((i) => [i.operation, i.amount]) : parsed.issues).toEqual([
      ['deposit', 10050n],
      ['refund', 2000n],
    ]);
  });

  it('give an intent CSV example that is accepted', () => {
    const api = TEXT.get('docs/api.md')!;
    const parsed = parseIntentsCsv(blockAfter(api, 'CSV (`payrecon backfill intents', 'csv'), ['sandbox']);
    expect(parsed.ok ? parsed.intents.map((i) => [i.operation, i.amount]) : parsed.issues).toEqual([
      ['deposit', 25000n],
      ['cashout', 7525n],
    ]);
  });

  it('name a Node version the engines field allows', () => {
    const pkg = JSON.parse(read('package.json')) as { engines: { node: string } };
    expect(pkg.engines.node).toBe('>=20.18');
    expect(README).toContain('Node.js 20.18 or later');
  });
});
