/** Line identities: stable, unambiguous, and two equal lines of one statement stay two. */
import { describe, expect, it } from 'vitest';
import {
  contentHash,
  contentIdentity,
  normaliseText,
  occurrenceCounter,
  referenceIdentity,
} from '../../src/imports/identity.ts';

describe('line identities', () => {
  it('is the SHA-256 of its parts, the same on every call', () => {
    const id = referenceIdentity('DE89370400440532013000', ['BNK-1']);
    expect(id).toMatch(/^[0-9a-f]{64}$/);
    expect(referenceIdentity('DE89370400440532013000', ['BNK-1'])).toBe(id);
    expect(referenceIdentity('DE89370400440532013001', ['BNK-1'])).not.toBe(id);
  });

  it('never confuses parts joined differently, nor a reference with a content', () => {
    expect(referenceIdentity('A', ['B:C'])).not.toBe(referenceIdentity('A:B', ['C']));
    expect(referenceIdentity('A', ['B', 'C'])).not.toBe(referenceIdentity('A', ['B,C']));
    expect(referenceIdentity('A', ['1'])).not.toBe(contentIdentity('A', [], 1));
    expect(contentHash(['a', 'b'])).not.toBe(contentHash(['a,b']));
  });

  it('numbers equal contents in the order seen, so two equal fees keep two identities', () => {
    const next = occurrenceCounter();
    const fee = ['EUR', '2026-11-27', '-0.01'];
    expect([next(fee), next(['EUR', '2026-11-27', '-0.02']), next([...fee])]).toEqual([1, 1, 2]);
    expect(contentIdentity('A', fee, 1)).not.toBe(contentIdentity('A', fee, 2));
  });

  it('normalises free text: NFC, one space for each run of white space, trimmed', () => {
    expect(normaliseText('  Caf\u0065\u0301\t fee\n')).toBe('Caf\u00e9 fee');
  });
});
