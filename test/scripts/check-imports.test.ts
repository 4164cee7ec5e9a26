/** The import-rule check (scripts/check-imports.ts) over a small source tree written for the test. */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkImports, importCycles } from '../../scripts/check-imports.ts';

const root = mkdtempSync(join(tmpdir(), 'payrecon-imports-'));
const src = join(root, 'src');
afterAll(() => rmSync(root, { recursive: true, force: true }));

function write(path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

write('src/domain/money.ts', 'export const x = 1;\n');
write('src/logger.ts', "import { x } from './domain/money.ts';\nexport type Logger = { x: typeof x };\n");
write('src/config.ts', 'export const config = {};\n');
write('src/db/ledger.ts', "import { x } from '../domain/money.ts';\nexport const y = x;\n");
write('src/provider/client.ts', "import type { Logger } from '../logger.ts';\nexport type L = Logger;\n");
write('src/consumers/fetcher.ts', 'export const f = 1;\n');
write('src/wiring.ts', "export const w = () => import('./embedded/broker.ts');\n");
write('src/embedded/broker.ts', 'export const b = 1;\n');

describe('check-imports', () => {
  it('passes imports that keep to the layout (type-only Logger, wiring importing embedded)', () => {
    const { problems, files } = checkImports(src, []);
    expect(files).toBe(8);
    expect(problems).toEqual([]);
  });

  it('names each import that breaks a rule, static and dynamic', () => {
    write(
      'src/domain/bad.ts',
      "import { y } from '../db/ledger.ts';\nimport pg from 'pg';\nexport { y, pg };\n",
    );
    write(
      'src/producers/backfill.ts',
      "export const g = async () => (await import('../consumers/fetcher.ts')).f;\n",
    );
    write('src/provider/bad.ts', "import { config } from '../config.ts';\nexport { config };\n");
    const { problems } = checkImports(src, []);
    expect(problems.map((p) => `${p.from} -> ${p.to}`).sort()).toEqual([
      'src/domain/bad.ts -> pg',
      'src/domain/bad.ts -> src/db/ledger.ts',
      'src/producers/backfill.ts -> src/consumers/fetcher.ts',
      'src/provider/bad.ts -> src/config.ts',
    ]);
  });

  it('accepts an allow-listed import, and fails an allow-list entry that matches nothing', () => {
    const allow = [
      { from: 'src/producers/backfill.ts', to: 'src/consumers/fetcher.ts', why: 'moving' },
      { from: 'src/db/ledger.ts', to: 'src/logger.ts', why: 'stale' },
    ];
    const { problems } = checkImports(src, allow);
    expect(problems.map((p) => `${p.from} -> ${p.to}`)).not.toContain(
      'src/producers/backfill.ts -> src/consumers/fetcher.ts',
    );
    expect(problems.find((p) => p.from === 'src/db/ledger.ts')?.rule).toMatch(/matches no import/);
  });

  it('names a file outside src/config.ts that reads process.env, and accepts it in config and tests', () => {
    write('src/config.ts', 'export const config = { user: process.env.USER };\n');
    write('src/db/ledger.test.ts', 'export const t = process.env.CI;\n');
    write('src/reports/main.ts', 'export const by = process.env.USER ?? null;\n');
    const { problems } = checkImports(src, []);
    const env = problems.filter((p) => p.to === 'process.env').map((p) => p.from);
    expect(env).toEqual(['src/reports/main.ts']);
  });
});

describe('check-imports: import cycles', () => {
  const tree = mkdtempSync(join(tmpdir(), 'payrecon-cycles-'));
  const treeSrc = join(tree, 'src');
  afterAll(() => rmSync(tree, { recursive: true, force: true }));
  const put = (path: string, text: string) => {
    mkdirSync(dirname(join(tree, path)), { recursive: true });
    writeFileSync(join(tree, path), text);
  };
  const cyclesOf = () => checkImports(treeSrc, []).problems.filter((p) => p.cycle !== undefined);
  const script = join(dirname(new URL(import.meta.url).pathname), '../../scripts/check-imports.ts');
  const run = () => spawnSync(process.execPath, ['--import', 'tsx', script, treeSrc], { encoding: 'utf8' });

  put('src/domain/money.ts', 'export const x = 1;\n');
  put('src/db/read.ts', "import { x } from '../domain/money.ts';\nexport const r = x;\n");
  put('src/db/write.ts', "import { r } from './read.ts';\nexport const w = r;\n");
  put('src/db/service.ts', "import { w } from './write.ts';\nexport const s = () => w;\n");

  it('passes a tree without a cycle, as a function and as the command', () => {
    expect(checkImports(treeSrc, []).problems).toEqual([]);
    const result = run();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^imports: 4 files, 3 imports keep to the layout, no cycle$/m);
  });

  it('fails a deliberately added cycle and prints it on one line', () => {
    put(
      'src/db/read.ts',
      "import { x } from '../domain/money.ts';\nimport { s } from './service.ts';\nexport const r = x;\nexport { s };\n",
    );
    expect(cyclesOf().map((p) => p.cycle)).toEqual([
      ['src/db/read.ts', 'src/db/service.ts', 'src/db/write.ts', 'src/db/read.ts'],
    ]);
    const result = run();
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      'payrecon: imports: cycle: src/db/read.ts -> src/db/service.ts -> src/db/write.ts -> src/db/read.ts\n',
    );
  });

  it('counts type-only and dynamic imports as edges of a cycle', () => {
    put(
      'src/db/read.ts',
      "import type { s } from './service.ts';\nexport const r = 1;\nexport type S = typeof s;\n",
    );
    expect(cyclesOf().map((p) => p.cycle?.length)).toEqual([4]);
    put('src/db/read.ts', "export const r = 1;\nexport const later = () => import('./service.ts');\n");
    expect(cyclesOf().map((p) => p.cycle?.length)).toEqual([4]);
  });

  it('passes again once the cycle is removed', () => {
    put('src/db/read.ts', "import { x } from '../domain/money.ts';\nexport const r = x;\n");
    expect(cyclesOf()).toEqual([]);
    expect(run().status).toBe(0);
  });

  it('names one cycle per tangle, the shortest from its first file, and a file importing itself', () => {
    const graph = new Map<string, string[]>([
      ['a', ['b']],
      ['b', ['c', 'a']],
      ['c', ['a']],
      ['d', ['d']],
      ['e', ['a']],
    ]);
    expect(importCycles(graph)).toEqual([
      ['a', 'b', 'a'],
      ['d', 'd'],
    ]);
  });
});
