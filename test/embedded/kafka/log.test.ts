import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PartitionLog } from '../../../src/embedded/kafka/log.ts';
import { tempDir } from './helpers.ts';

/** A RecordBatch v2 shell: a real header (length, magic, offsets delta, timestamps) and opaque payload. */
function batch(records: number, payloadBytes = 100, maxTimestamp = Date.now()): Buffer {
  const buf = Buffer.alloc(61 + payloadBytes, 0x61);
  buf.writeBigInt64BE(0n, 0);
  buf.writeInt32BE(buf.length - 12, 8);
  buf.writeInt32BE(-1, 12);
  buf.writeInt8(2, 16);
  buf.writeUInt32BE(0, 17);
  buf.writeInt16BE(0, 21);
  buf.writeInt32BE(records - 1, 23);
  buf.writeBigInt64BE(BigInt(maxTimestamp), 27);
  buf.writeBigInt64BE(BigInt(maxTimestamp), 35);
  buf.writeBigInt64BE(-1n, 43);
  buf.writeInt16BE(-1, 51);
  buf.writeInt32BE(-1, 53);
  buf.writeInt32BE(records, 57);
  return buf;
}

function baseOffsets(data: Buffer): number[] {
  const out: number[] = [];
  for (let pos = 0; pos < data.length; pos += data.readInt32BE(pos + 8) + 12) {
    out.push(Number(data.readBigInt64BE(pos)));
  }
  return out;
}

const config = { segmentBytes: 64 * 1024 * 1024, retentionBytes: -1, retentionMs: -1 };
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
function dir(): string {
  const d = tempDir('log');
  dirs.push(d);
  return d;
}

describe('PartitionLog', () => {
  it('assigns offsets by batch, reads the batch holding any offset, and keeps batches verbatim', () => {
    const log = PartitionLog.open(dir(), config);
    const sent = [batch(3), batch(1), batch(5)];
    expect(sent.map((b) => log.append(Buffer.from(b)))).toEqual([0, 3, 4]);
    expect(log.endOffset).toBe(9);
    expect(baseOffsets(log.read(0, 1 << 20))).toEqual([0, 3, 4]);
    expect(baseOffsets(log.read(2, 1 << 20))).toEqual([0, 3, 4]);
    expect(baseOffsets(log.read(6, 1 << 20))).toEqual([4]);
    expect(log.read(9, 1 << 20).length).toBe(0);
    // Only baseOffset and partitionLeaderEpoch change; everything the CRC covers (from byte 21) is intact.
    const stored = log.read(4, 1 << 20);
    expect(stored.subarray(21).equals(sent[2]!.subarray(21))).toBe(true);
    expect(stored.readInt32BE(12)).toBe(0);
    log.close();
  });

  it('returns whole batches only, and the first one even when it exceeds maxBytes', () => {
    const log = PartitionLog.open(dir(), config);
    for (let i = 0; i < 10; i++) log.append(batch(1, 1000));
    expect(baseOffsets(log.read(0, 10))).toEqual([0]);
    expect(baseOffsets(log.read(0, 2500))).toEqual([0, 1]);
    log.close();
  });

  it('rolls segments, survives a reopen, and drops a torn tail', () => {
    const d = dir();
    const small = { ...config, segmentBytes: 4096 };
    const log = PartitionLog.open(d, small);
    for (let i = 0; i < 100; i++) log.append(batch(2, 200));
    log.close();
    const segments = fs.readdirSync(d).filter((f) => f.endsWith('.log'));
    expect(segments.length).toBeGreaterThan(5);
    const last = path.join(d, segments.sort().at(-1)!);
    fs.appendFileSync(last, batch(4, 200).subarray(0, 90));

    const again = PartitionLog.open(d, small);
    expect(again.endOffset).toBe(200);
    expect(baseOffsets(again.read(151, 300))).toEqual([150]);
    expect(again.append(batch(1))).toBe(200);
    expect(baseOffsets(again.read(200, 1 << 20))).toEqual([200]);
    again.close();
  });

  it('deletes the oldest segments past the size limit and the age limit', () => {
    const log = PartitionLog.open(dir(), { segmentBytes: 2048, retentionBytes: 8192, retentionMs: -1 });
    for (let i = 0; i < 100; i++) log.append(batch(1, 300));
    expect(log.enforceRetention()).toBeGreaterThan(0);
    expect(log.sizeBytes).toBeLessThanOrEqual(8192);
    expect(log.startOffset).toBeGreaterThan(0);
    expect(baseOffsets(log.read(log.startOffset, 1 << 20))[0]).toBe(log.startOffset);
    expect(log.endOffset).toBe(100);
    log.close();

    const aged = PartitionLog.open(dir(), { segmentBytes: 2048, retentionBytes: -1, retentionMs: 1000 });
    for (let i = 0; i < 20; i++) aged.append(batch(1, 300));
    expect(aged.enforceRetention(Date.now())).toBe(0);
    expect(aged.enforceRetention(Date.now() + 5000)).toBeGreaterThan(0);
    expect(aged.startOffset).toBe(20);
    expect(aged.endOffset).toBe(20);
    expect(aged.append(batch(1))).toBe(20);
    aged.close();
  });

  it('acknowledges a retried idempotent batch with its first offset instead of appending it again', () => {
    const d = dir();
    const idempotent = (seq: number, records: number) => {
      const b = batch(records);
      b.writeBigInt64BE(7000n, 43);
      b.writeInt16BE(0, 51);
      b.writeInt32BE(seq, 53);
      return b;
    };
    const log = PartitionLog.open(d, config);
    expect(log.append(idempotent(0, 3))).toBe(0);
    expect(log.append(idempotent(3, 2))).toBe(3);
    expect(log.append(idempotent(3, 2))).toBe(3);
    expect(log.endOffset).toBe(5);
    log.close();
    // The producer state is rebuilt from the log after a restart.
    const again = PartitionLog.open(d, config);
    expect(again.append(idempotent(3, 2))).toBe(3);
    expect(again.append(idempotent(5, 1))).toBe(5);
    expect(again.endOffset).toBe(6);
    // Non-idempotent batches (producer id -1) are never deduplicated.
    expect(again.append(batch(1))).toBe(6);
    expect(again.append(batch(1))).toBe(7);
    again.close();
  });

  it('rejects anything that is not a RecordBatch v2', () => {
    const log = PartitionLog.open(dir(), config);
    const v1 = batch(1);
    v1.writeInt8(1, 16);
    expect(() => log.append(v1)).toThrow(/v2/);
    expect(() => log.append(batch(1).subarray(0, 70))).toThrow();
    expect(log.endOffset).toBe(0);
    log.close();
  });
});
