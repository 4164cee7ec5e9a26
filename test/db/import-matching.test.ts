/**
 * Each import keeps the result of the matching run its new lines started: the sandbox's cash-leg files
 * imported one by one through `importFile` (the page's, the API's and the command's path) with the
 * configured matching, each import's counts by rule equal the rows of `matches` that run created, and the
 * import as read back (`getImport`, `listImports`) carries the same result. Imported again, no line is new:
 * no run, no result. A run whose connection goes away leaves the import recorded without a result, and
 * the next run takes its lines.
 */
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.ts';
import { getImport, listImports } from '../../src/db/imports/read.ts';
import { runMatching } from '../../src/db/matching/service.ts';
import { DEFAULT_MATCH_RULES } from '../../src/domain/matching.ts';
import { type ImportDeps, importFile, matcherFrom } from '../../src/import-service.ts';
import { createTestDatabase, holdMatchingLock, type TestDatabase } from './helpers.ts';
import { type Setup, sandboxFiles, type Upload } from './sandbox-cash-files.ts';

let t: TestDatabase;
let setup: Setup;
let deps: ImportDeps;

beforeAll(async () => {
  t = await createTestDatabase();
  setup = await sandboxFiles();
  deps = {
    db: t.db,
    bankAccounts: setup.bankAccounts.map((b) => ({ ...b, name: `Settlement ${b.currency}` })),
    match: matcherFrom(loadConfig({})),
  };
}, 120_000);

afterAll(async () => {
  await t?.drop();
});

const lastMatchId = async () =>
  (await sql<{ id: string }>`SELECT coalesce(max(id), 0)::text AS id FROM matches`.execute(t.db)).rows[0]!.id;

/** The rows of `matches` created after `after`, counted by rule. */
async function matchesByRuleAfter(after: string): Promise<Record<string, number>> {
  const { rows } = await sql<{ rule: string; n: number }>`
    SELECT rule, count(*)::int AS n FROM matches WHERE id > ${after}::bigint GROUP BY rule`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.rule, r.n]));
}

const upload = (u: Upload) => importFile(deps, { ...u, user: 'test' });

describe('the matching result of each import', () => {
  it('records per rule the matches its run created, and reads them back', async () => {
    // The last statement is kept for the run that goes away (below).
    const uploads = setup.uploads.slice(0, -1);
    const byRule: Record<string, number> = {};
    for (const u of uploads) {
      const before = await lastMatchId();
      const outcome = await upload(u);
      expect(outcome.id, u.fileName).not.toBeNull();
      expect(outcome.matchingError, u.fileName).toBeUndefined();
      const created = await matchesByRuleAfter(before);
      const detail = await getImport(t.db, outcome.id!);
      if (detail!.import.newLines === 0) {
        // A statement whose lines an earlier file brought: no run, no result.
        expect(outcome.matching, u.fileName).toBeNull();
        expect(created).toEqual({});
      } else {
        expect(outcome.matching, u.fileName).not.toBeNull();
        expect(outcome.matching!.matched, u.fileName).toEqual(created);
        for (const n of Object.values(outcome.matching!.unmatched)) expect(Number.isInteger(n)).toBe(true);
      }
      expect(detail!.import.matching, u.fileName).toEqual(outcome.matching);
      for (const [rule, n] of Object.entries(created)) byRule[rule] = (byRule[rule] ?? 0) + n;
    }
    // The files matched something, and the counts add up to every match made.
    expect(Object.values(byRule).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    expect(await matchesByRuleAfter('0')).toEqual(byRule);
    // The settlement report came first: its run had no bank line to match and says what it left.
    const settlements = (await listImports(t.db, 500)).find((i) => i.kind === 'provider-settlements')!;
    expect(settlements.matching?.matched).toEqual({});
    expect(settlements.matching?.unmatched.settlements).toBeGreaterThan(0);

    // Again: every line is known, so no run and no result; no match is added.
    const before = await lastMatchId();
    for (const u of uploads) {
      const again = await upload(u);
      expect(again.matching, u.fileName).toBeNull();
      expect((await getImport(t.db, again.id!))!.import).toMatchObject({ newLines: 0, matching: null });
    }
    expect(await lastMatchId()).toBe(before);
  }, 120_000);

  it('keeps the import without a result when its run goes away; the next run takes its lines', async () => {
    const last = setup.uploads.at(-1)!;
    const lock = await holdMatchingLock(t);
    let outcome: Awaited<ReturnType<typeof upload>>;
    try {
      const importing = upload(last);
      await lock.dropWaitingRun();
      outcome = await importing;
    } finally {
      await lock.release();
    }
    expect(outcome.id).not.toBeNull();
    expect(outcome.matching).toBeNull();
    expect(outcome.matchingError).toMatch(/terminat/);
    const stored = (await getImport(t.db, outcome.id!))!.import;
    expect(stored.newLines).toBeGreaterThan(0);
    expect(stored.matching).toBeNull();

    // The next run (the command's `payrecon match`) takes them: each line is matched or raised.
    await runMatching(t.db, DEFAULT_MATCH_RULES, { bankAccounts: setup.bankAccounts });
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM bank_statement_lines b
      WHERE b.import_id = ${outcome.id}::bigint
        AND NOT EXISTS (SELECT 1 FROM match_members m WHERE m.side = 'bank_line' AND m.identity = b.identity AND m.live)
        AND NOT EXISTS (SELECT 1 FROM exceptions e WHERE e.type = 'BANK_LINE_UNMATCHED' AND e.entity_id = b.identity)`.execute(
      t.db,
    );
    expect(rows[0]!.n).toBe(0);
    // A run the command starts belongs to no import: the import stays without a result.
    expect((await getImport(t.db, outcome.id!))!.import.matching).toBeNull();
  }, 60_000);
});
