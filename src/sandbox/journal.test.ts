import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeValue, encodeValue, Journal, JournalLockedError } from './journal.ts';

const root = mkdtempSync(join(tmpdir(), 'payrecon-journal-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A key-value state the journal writes from. */
function source(state: Map<string, unknown>) {
  return { get: (k: string) => state.get(k), entries: () => state.entries() };
}

const segment = (dir: string) =>
  join(
    dir,
    readdirSync(dir)
      .filter((f) => f.startsWith('journal-'))
      .sort()
      .at(-1)!,
  );

describe('sandbox journal', () => {
  it('keeps bigints (money) and drops cached bodies', () => {
    const text = encodeValue({ amount: 123456789012345678901n, cachedBody: 'x', n: [1n] });
    expect(text).not.toContain('cachedBody');
    expect(decodeValue(text)).toEqual({ amount: 123456789012345678901n, n: [1n] });
  });

  it('writes marked keys on sync (last value wins, deletes kept) and reads them back', async () => {
    const dir = join(root, 'basic');
    const { journal, recovered } = await Journal.open(dir);
    expect(recovered.fresh).toBe(true);
    const state = new Map<string, unknown>();
    journal.attach(source(state));
    state.set('a', { v: 1n });
    journal.mark('a');
    state.set('b', 'two');
    journal.mark('b');
    state.set('a', { v: 2n });
    journal.mark('a');
    await journal.sync();
    state.delete('b');
    journal.mark('b');
    await journal.sync();
    expect(journal.stats.fsyncs).toBeGreaterThanOrEqual(2);
    await journal.close({ snapshot: false });
    const again = await Journal.open(dir);
    expect([...again.recovered.values]).toEqual([['a', { v: 2n }]]);
    expect(again.recovered.replayed).toBe(3);
    await again.journal.close({ snapshot: false });
  });

  it('cuts a torn or corrupt tail and keeps every line before it', async () => {
    const dir = join(root, 'torn');
    const { journal } = await Journal.open(dir);
    const state = new Map<string, unknown>([
      ['x', 1],
      ['y', 2],
    ]);
    journal.attach(source(state));
    journal.mark('x');
    journal.mark('y');
    await journal.sync();
    await journal.close({ snapshot: false });
    const path = segment(dir);
    const good = statSync(path).size;
    // Half a line (a crash during the write) ...
    appendFileSync(path, '0badc0de\t{"k":"z","v":');
    let r = await Journal.open(dir);
    expect(r.recovered.tornBytes).toBeGreaterThan(0);
    expect([...r.recovered.values]).toEqual([
      ['x', 1],
      ['y', 2],
    ]);
    expect(statSync(path).size).toBe(good);
    await r.journal.close({ snapshot: false });
    // ... and a whole line whose checksum does not match (bytes changed on disk).
    const text = readFileSync(path, 'utf8');
    writeFileSync(path, text.replace('"v":2', '"v":3'));
    r = await Journal.open(dir);
    expect([...r.recovered.values]).toEqual([['x', 1]]);
    await r.journal.close({ snapshot: false });
  });

  it('compacts into a snapshot and recovers from snapshot plus the newer segment', async () => {
    const dir = join(root, 'compact');
    const { journal } = await Journal.open(dir, { compactBytes: 2000 });
    const state = new Map<string, unknown>();
    journal.attach(source(state));
    for (let i = 0; i < 200; i++) {
      state.set(`k${i % 50}`, { i, pad: 'x'.repeat(40) });
      journal.mark(`k${i % 50}`);
      if (i % 10 === 9) await journal.sync();
    }
    await journal.sync();
    // Let the background snapshot finish.
    for (let i = 0; i < 100 && journal.stats.snapshots === 0; i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(journal.stats.snapshots).toBeGreaterThan(0);
    state.set('late', true);
    journal.mark('late');
    await journal.sync();
    await journal.close({ snapshot: false });
    const files = readdirSync(dir);
    expect(files.filter((f) => f.startsWith('snapshot-')).length).toBe(1);
    const r = await Journal.open(dir);
    expect(r.recovered.values.size).toBe(51);
    expect(r.recovered.values.get('k49')).toEqual({ i: 199, pad: 'x'.repeat(40) });
    expect(r.recovered.values.get('late')).toBe(true);
    r.journal.attach(source(r.recovered.values));
    await r.journal.close();
    // A clean close leaves one snapshot and nothing to replay.
    const r2 = await Journal.open(dir);
    expect(r2.recovered.replayed).toBe(0);
    expect(r2.recovered.values.size).toBe(51);
    await r2.journal.close({ snapshot: false });
  });

  it('ignores a snapshot cut short (no end line) and replays from the older state', async () => {
    const dir = join(root, 'cut-snapshot');
    const { journal } = await Journal.open(dir);
    const state = new Map<string, unknown>([['a', 1]]);
    journal.attach(source(state));
    journal.mark('a');
    await journal.sync();
    await journal.close({ snapshot: false });
    writeFileSync(join(dir, 'snapshot-00000009.jsonl'), '00000000\t{"k":"a","v":99}\n');
    const r = await Journal.open(dir);
    expect(r.recovered.values.get('a')).toBe(1);
    await r.journal.close({ snapshot: false });
  });

  it('holds keys marked under a hold until its release; a sync covering them waits for it', async () => {
    const dir = join(root, 'hold');
    const { journal } = await Journal.open(dir);
    const state = new Map<string, unknown>([
      ['entity', 'E'],
      ['other', 'O'],
      ['answer', 'A'],
    ]);
    journal.attach(source(state));
    const token = journal.hold();
    journal.mark('entity', token);
    journal.mark('other');
    let covered = false;
    const waiting = journal.sync().then(() => {
      covered = true;
    });
    await new Promise((r) => setTimeout(r, 60));
    // `other` is written, `entity` is not, and the sync that covers it still waits.
    const text = () => readFileSync(segment(dir), 'utf8');
    expect(text()).toContain('"k":"other"');
    expect(text()).not.toContain('"k":"entity"');
    expect(covered).toBe(false);
    journal.mark('answer');
    journal.release(token);
    await waiting;
    expect(covered).toBe(true);
    // The entity and the answer marked before the release went to disk in one write.
    const lines = text().trim().split('\n');
    const at = (k: string) => lines.findIndex((l) => l.includes(`"k":"${k}"`));
    expect(Math.abs(at('entity') - at('answer'))).toBe(1);
    expect(journal.stats.writes).toBe(2);
    await journal.close({ snapshot: false });
  });

  it('refuses a directory locked by a live process and takes over a dead one', async () => {
    const dir = join(root, 'lock');
    const { journal } = await Journal.open(dir);
    // This process holds it: a second open sees a live owner (itself counts as another opener here).
    writeFileSync(join(dir, 'LOCK'), `${process.ppid}\n`);
    await expect(Journal.open(dir)).rejects.toBeInstanceOf(JournalLockedError);
    writeFileSync(join(dir, 'LOCK'), '999999999\n');
    const again = await Journal.open(dir);
    await again.journal.close({ snapshot: false });
    await journal.close({ snapshot: false }).catch(() => undefined);
  });
});
