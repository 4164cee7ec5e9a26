/** The imports area stands on the domain alone; the adapters (the CLI's command, the API, jobs) may use it. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkImports } from '../../scripts/check-imports.ts';

const root = mkdtempSync(join(tmpdir(), 'payrecon-imports-area-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function write(path: string, text: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), text);
}

describe('the imports area', () => {
  it('may import the domain only, and the adapters may import it', () => {
    write('src/domain/money.ts', 'export const x = 1;\n');
    write('src/db/ledger.ts', "import { x } from '../domain/money.ts';\nexport const y = x;\n");
    write('src/imports/camt.ts', "import { x } from '../domain/money.ts';\nexport const c = x;\n");
    write('src/api/imports.ts', "import { c } from '../imports/camt.ts';\nexport const a = c;\n");
    write('src/jobs/fetch.ts', "import { c } from '../imports/camt.ts';\nexport const j = c;\n");
    expect(checkImports(join(root, 'src'), []).problems).toEqual([]);
    write('src/imports/store.ts', "import { y } from '../db/ledger.ts';\nexport const s = y;\n");
    expect(checkImports(join(root, 'src'), []).problems).toEqual([
      { from: 'src/imports/store.ts', to: 'src/db/ledger.ts', rule: 'imports may import only domain' },
    ]);
  });
});
