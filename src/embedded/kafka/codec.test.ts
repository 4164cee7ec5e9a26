import { describe, expect, it } from 'vitest';
import { Reader, Writer } from './codec.ts';

describe('Writer', () => {
  it('keeps writing after a zero-copy byte field that filled its buffer exactly', () => {
    // int32 length prefix fills the 4-byte buffer; the 16 KiB field is referenced; what is left is empty.
    const big = Buffer.alloc(16 * 1024, 7);
    const w = new Writer(4).nbytes(big).int16(513).nstring('after');
    const out = w.done();
    expect(out.length).toBe(4 + big.length + 2 + 2 + 5);
    const r = new Reader(out);
    expect(r.nbytes()!.equals(big)).toBe(true);
    expect(r.int16()).toBe(513);
    expect(r.nstring()).toBe('after');
  });

  it('writes small and large byte fields in order, with or without room left', () => {
    for (const size of [1, 4, 5, 64, 256]) {
      const fields = [Buffer.alloc(20_000, 1), Buffer.alloc(3, 2), Buffer.alloc(17_000, 3), Buffer.alloc(0)];
      const w = new Writer(size);
      for (const f of fields) w.nbytes(f).int8(9);
      const r = new Reader(w.done());
      for (const f of fields) {
        expect(r.nbytes()!.equals(f), `writer of ${size}`).toBe(true);
        expect(r.int8()).toBe(9);
      }
    }
  });
});
