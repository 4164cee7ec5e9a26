/** The import-rule check (scripts/check-imports.ts) over a small source tree written for the test. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkImports } from '../../scripts/check-imports.ts';

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
