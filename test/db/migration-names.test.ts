/**
 * The migrator runs migrations in the order of their names, so a name must sort after every name listed
 * before it: the list in src/db/connection.ts is in the order the migrations were added, and that order is
 * the names' own. Each name starts with the UTC instant it was written (`YYYYMMDDTHHMMSSZ`, a real one, not
 * in the future), and every file of src/db/migrations is listed exactly once, under its own name.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/db/connection.ts';

const SRC_DB = join(import.meta.dirname, '../../src/db');
const NAME = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z_[a-z0-9]+(?:_[a-z0-9]+)*$/;

describe('migration names', () => {
  const names = Object.keys(MIGRATIONS);

  it('sort in the order the migrations are listed (the order they were added)', () => {
    expect(names.length).toBeGreaterThan(0);
    expect(names).toEqual([...names].sort());
  });

  it('start with a real UTC instant, no later than now, and name what they do', () => {
    for (const name of names) {
      const m = NAME.exec(name);
      expect(m, name).not.toBeNull();
      const [, y, mo, d, h, mi, s] = m!.map(Number);
      const at = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s!));
      // Date.UTC rolls an impossible field over (month 13, minute 61): a real instant reads back the same.
      const fields = [at.getUTCFullYear(), at.getUTCMonth() + 1, at.getUTCDate()];
      fields.push(at.getUTCHours(), at.getUTCMinutes(), at.getUTCSeconds());
      expect(fields, name).toEqual([y, mo, d, h, mi, s]);
      expect(at.getTime(), name).toBeLessThanOrEqual(Date.now());
    }
  });

  it('list every file of src/db/migrations exactly once, under its own name', async () => {
    const files = readdirSync(join(SRC_DB, 'migrations'))
      .filter((f) => f.endsWith('.ts'))
      .map((f) => f.slice(0, -'.ts'.length))
      .sort();
    expect(names).toEqual(files);
    // Each key is the module of the file of that name, and each file is imported once.
    const source = readFileSync(join(SRC_DB, 'connection.ts'), 'utf8');
    for (const name of names) {
      const imports = source.split(`from './migrations/${name}.ts'`).length - 1;
      expect(imports, name).toBe(1);
      const module = (await import(`../../src/db/migrations/${name}.ts`)) as { up: unknown; down: unknown };
      expect(MIGRATIONS[name]?.up, name).toBe(module.up);
      expect(MIGRATIONS[name]?.down, name).toBe(module.down);
      expect(typeof module.down, `${name} has a down`).toBe('function');
    }
  });
});
