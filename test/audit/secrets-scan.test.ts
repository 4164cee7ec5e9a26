/**
 * The secrets scanner's matching, without services: the multi-needle search (`NeedleSearch`) against
 * `indexOf` over seeded random needles and texts, the known-secret matching (`KnownSecrets`) against
 * the per-secret `indexOf` loop it replaced, and a log-only `scanForSecrets`.
 */
import { describe, expect, it } from 'vitest';
import { Rng } from '../../src/sandbox/rng.ts';
import { KnownSecrets, NeedleSearch, type Occurrence, scanForSecrets, variants } from './secrets-scan.ts';

/** What `firstOccurrences` must answer: each needle that `indexOf` finds, at that index. */
function naive(needles: readonly string[], text: string): Occurrence[] {
  const out: Occurrence[] = [];
  needles.forEach((n, needle) => {
    const index = text.indexOf(n);
    if (index >= 0) out.push({ needle, index });
  });
  return out;
}

const byNeedle = (o: Occurrence[]) => [...o].sort((a, b) => a.needle - b.needle);

function randomString(rng: Rng, alphabet: readonly string[], min: number, max: number): string {
  let s = '';
  for (let n = rng.int(min, max); n > 0; n--) s += rng.pick(alphabet);
  return s;
}

const PRINTABLE = [...Array(95)].map((_, i) => String.fromCharCode(32 + i));

describe('NeedleSearch', () => {
  it('finds the classic overlapping needles at their first index', () => {
    const needles = ['he', 'she', 'his', 'hers'];
    const search = new NeedleSearch(needles);
    expect(byNeedle(search.firstOccurrences('ushers'))).toEqual([
      { needle: 0, index: 2 },
      { needle: 1, index: 1 },
      { needle: 3, index: 2 },
    ]);
    expect(search.firstOccurrences('ahishers hers')).toEqual(
      expect.arrayContaining([
        { needle: 0, index: 4 },
        { needle: 1, index: 3 },
        { needle: 2, index: 1 },
        { needle: 3, index: 4 },
      ]),
    );
    expect(search.firstOccurrences('nothing to see')).toEqual([]);
  });

  it('finds needles that are prefixes, suffixes or repeats of others, and needles given twice', () => {
    const needles = ['abcd', 'abc', 'ab', 'bcd', 'cd', 'd', 'aaa', 'aa', 'abc'];
    const search = new NeedleSearch(needles);
    for (const text of ['abcd', 'xabcdx', 'aaaa', 'aabcaaa', 'dcba', 'abab', 'cdabc', '', 'a']) {
      expect(byNeedle(search.firstOccurrences(text)), text).toEqual(naive(needles, text));
    }
    // Given twice: both positions are answered, at the same index.
    expect(byNeedle(search.firstOccurrences('xxabc'))).toEqual([
      { needle: 1, index: 2 },
      { needle: 2, index: 2 },
      { needle: 8, index: 2 },
    ]);
  });

  it('reports each needle once per text, at its first occurrence, and starts afresh on the next text', () => {
    const search = new NeedleSearch(['secret', 'cret']);
    expect(byNeedle(search.firstOccurrences('cret secret secret'))).toEqual([
      { needle: 0, index: 5 },
      { needle: 1, index: 0 },
    ]);
    expect(byNeedle(search.firstOccurrences('a secret'))).toEqual([
      { needle: 0, index: 2 },
      { needle: 1, index: 4 },
    ]);
  });

  it('compares UTF-16 code units as indexOf does (surrogate halves included)', () => {
    const needles = ['😀x', '\ude00x', 'é€', 'ü'];
    const search = new NeedleSearch(needles);
    for (const text of ['a😀x', '😀😀x', '\ude00x', 'xé€ü', 'ue\u0301']) {
      expect(byNeedle(search.firstOccurrences(text)), text).toEqual(naive(needles, text));
    }
  });

  it('refuses an empty needle and finds nothing without needles', () => {
    expect(() => new NeedleSearch(['abc', ''])).toThrow(/empty needle/);
    expect(new NeedleSearch([]).firstOccurrences('anything')).toEqual([]);
  });

  it('finds each of many random needles planted in random texts at the index indexOf gives', () => {
    const rng = new Rng(20_240_611);
    const needles = [...Array(2_000)].map(() => randomString(rng, PRINTABLE, 6, 70));
    const search = new NeedleSearch(needles);
    const sparse = new NeedleSearch(needles, { denseCells: 0 });
    for (let round = 0; round < 200; round++) {
      // Random filler with needles between the pieces, each planted needle left whole.
      let text = randomString(rng, PRINTABLE, 0, 100);
      const planted: { needle: number; at: number }[] = [];
      for (let p = rng.int(1, 5); p > 0; p--) {
        const needle = rng.int(0, needles.length - 1);
        planted.push({ needle, at: text.length });
        text += needles[needle] + randomString(rng, PRINTABLE, 0, 100);
      }
      const found = byNeedle(search.firstOccurrences(text));
      expect(found).toEqual(naive(needles, text));
      expect(byNeedle(sparse.firstOccurrences(text))).toEqual(found);
      for (const p of planted) {
        const o = found.find((f) => f.needle === p.needle);
        // At the planted place, unless the needle also occurs earlier.
        expect(o?.index).toBe(text.indexOf(needles[p.needle]!));
        expect(o!.index).toBeLessThanOrEqual(p.at);
      }
    }
  });

  it('finds nothing in clean texts', () => {
    const rng = new Rng(7);
    const lower = [...'abcdefghijklmnopqrstuvwxyz0123456789'];
    const upper = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZ{}":,. '];
    const needles = [...Array(1_000)].map(() => randomString(rng, lower, 6, 40));
    const search = new NeedleSearch(needles);
    for (let round = 0; round < 200; round++) {
      expect(search.firstOccurrences(randomString(rng, upper, 0, 600))).toEqual([]);
      // Texts of the needles' own characters (hex-like ids, say) that hold none of them.
      const text = randomString(rng, [...lower, ...upper], 0, 600);
      expect(search.firstOccurrences(text)).toEqual(naive(needles, text));
    }
  });

  it('answers as indexOf does over thousands of seeded random cases with small alphabets', () => {
    const rng = new Rng(424_242);
    const alphabets = [[...'ab'], [...'abc'], [...'abcd'], ['a', 'b', '😀', '\ud83d', 'é'], PRINTABLE];
    let found = 0;
    for (let round = 0; round < 3_000; round++) {
      const alphabet = rng.pick(alphabets);
      const wide = alphabet === PRINTABLE;
      const needles = [...Array(rng.int(1, 40))].map(() => randomString(rng, alphabet, 1, wide ? 12 : 8));
      // Some needles built from others: prefixes, suffixes, extensions, repeats.
      for (let extra = rng.int(0, 6); extra > 0; extra--) {
        const base = rng.pick(needles);
        const cut = rng.int(1, base.length);
        const derived = rng.pick([
          base.slice(0, cut),
          base.slice(base.length - cut),
          base + randomString(rng, alphabet, 1, 3),
          base + base,
          base,
        ]);
        needles.push(derived);
      }
      // Wide states with dense rows, or (no room for them) binary-searched.
      const search = new NeedleSearch(needles, { denseCells: rng.chance(0.5) ? 0 : 1_000_000 });
      for (let t = 0; t < 3; t++) {
        let text = randomString(rng, alphabet, 0, wide ? 400 : 120);
        if (rng.chance(0.5)) {
          const at = rng.int(0, text.length);
          text = text.slice(0, at) + rng.pick(needles) + text.slice(at);
        }
        const expected = naive(needles, text);
        found += expected.length;
        expect(byNeedle(search.firstOccurrences(text)), JSON.stringify({ needles, text })).toEqual(expected);
      }
    }
    // The cases did exercise matches, not only misses.
    expect(found).toBeGreaterThan(10_000);
  });
});

/** The per-secret loop `KnownSecrets` replaced: for each secret, the first of its forms that occurs. */
function naiveKnown(secrets: readonly { label: string; value: string }[], text: string) {
  const out: { label: string; index: number; length: number }[] = [];
  for (const s of secrets) {
    for (const n of variants(s.value)) {
      const index = text.indexOf(n);
      if (index >= 0) {
        out.push({ label: s.label, index, length: n.length });
        break;
      }
    }
  }
  return out;
}

describe('KnownSecrets', () => {
  const chars = [...'abcdef0123456789ABCDEF +/=&<>"%\\-_.'];

  it('answers each secret once, with the first of its forms that occurs, as the per-secret loop did', () => {
    const rng = new Rng(99);
    for (let round = 0; round < 1_000; round++) {
      const secrets = [...Array(rng.int(1, 12))].map((_, i) => ({
        label: `secret ${i}`,
        value: rng.chance(0.3) ? rng.hex(rng.int(6, 20)) : randomString(rng, chars, 6, 16),
      }));
      if (rng.chance(0.3)) secrets.push({ label: 'again', value: rng.pick(secrets).value });
      const known = new KnownSecrets(secrets);
      let text = randomString(rng, chars, 0, 80);
      for (let p = rng.int(0, 4); p > 0; p--) {
        const s = rng.pick(secrets);
        const form = rng.pick([
          ...variants(s.value),
          s.value.slice(1),
          s.value.toLowerCase(),
          s.value.toUpperCase(),
        ]);
        const at = rng.int(0, text.length);
        text = text.slice(0, at) + form + text.slice(at);
      }
      expect(known.find(text), JSON.stringify({ secrets, text })).toEqual(naiveKnown(secrets, text));
    }
  });

  it('finds a later form when an earlier one is absent, and prefers the earlier form wherever it is', () => {
    const value = 'a b&c"d+e';
    const [raw, json, uri, form, xml] = variants(value);
    expect([raw, json, uri, form, xml]).toEqual([
      'a b&c"d+e',
      'a b&c\\"d+e',
      'a%20b%26c%22d%2Be',
      'a+b%26c%22d%2Be',
      'a b&amp;c&quot;d+e',
    ]);
    const known = new KnownSecrets([{ label: 'k', value }]);
    expect(known.find(`x ${xml} y`)).toEqual([{ label: 'k', index: 2, length: xml!.length }]);
    // The URL form first in the text, the raw value later: the raw value (first form) is answered.
    const text = `${uri} then ${raw}`;
    expect(known.find(text)).toEqual([{ label: 'k', index: text.lastIndexOf(raw!), length: raw!.length }]);
  });

  it('masks every known secret in an excerpt and leaves a clean one as it is', () => {
    const known = new KnownSecrets([
      { label: 'a', value: 'topsecret-1' },
      { label: 'b', value: 'deadbeef00' },
    ]);
    expect(known.hide('nothing here')).toBe('nothing here');
    expect(known.hide('x topsecret-1 y DEADBEEF00 z')).toBe('x to*******-1 y DE******00 z');
  });
});

describe('scanForSecrets over logs', () => {
  it('finds a planted secret in its line with a masked excerpt, and nothing in clean lines', async () => {
    const secret = 'Zq9+rT/wX2=';
    const lines = [
      JSON.stringify({ level: 30, msg: 'clean', id: 'a1b2c3d4e5f6' }),
      JSON.stringify({ level: 30, msg: 'sent', url: `https://x.test/?sig=${encodeURIComponent(secret)}` }),
      JSON.stringify({ level: 30, msg: 'clean again' }),
    ];
    const hits = await scanForSecrets({
      secrets: [
        { label: 'signature', value: secret },
        { label: 'short', value: 'abc' },
      ],
      logs: [{ name: 'app', text: lines.join('\n') }],
    });
    expect(hits).toHaveLength(1);
    expect(hits[0]).toMatchObject({
      detector: 'known',
      label: 'signature',
      place: 'log',
      location: 'log app:2',
    });
    expect(hits[0]!.excerpt).toContain('sig=Zq************3D"}');
    expect(hits[0]!.excerpt).not.toContain(encodeURIComponent(secret));
  });
});

describe('the cvv detector', () => {
  it('finds cvv/cvc/csc-named fields in any case, and nothing in long letter-digit runs without one', async () => {
    const lines = [
      JSON.stringify({ request: { cvc: '321' } }),
      `CARD_CVV2 = 1234 ${'ab12'.repeat(500)}`,
      `cScCode: '987'`,
      `${'f0e1d2c3'.repeat(1_000)} cv: 123 vv=456`,
    ];
    const hits = await scanForSecrets({ secrets: [], logs: [{ name: 'app', text: lines.join('\n') }] });
    expect(hits.map((h) => `${h.detector} ${h.label} @ ${h.location}`)).toEqual([
      'cvv cvc field with 3 digits @ log app:1',
      'cvv CARD_CVV2 field with 4 digits @ log app:2',
      'cvv cScCode field with 3 digits @ log app:3',
    ]);
  });
});
