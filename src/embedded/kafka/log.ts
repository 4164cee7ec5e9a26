/**
 * One partition's log: append-only segment files (`<baseOffset>.log`) holding RecordBatch v2 batches
 * exactly as the producer sent them, each with a sparse offset index (`<baseOffset>.index`, one
 * `offset i64 | position u32` entry per ~4 KiB of log). Only the index lives in memory; fetches read the
 * segment file, so memory does not grow with the log.
 */
import fs from 'node:fs';
import path from 'node:path';

/** Byte offsets inside a RecordBatch v2 header. */
const BASE_OFFSET = 0;
const BATCH_LENGTH = 8;
const LEADER_EPOCH = 12;
const MAGIC = 16;
const LAST_OFFSET_DELTA = 23;
const MAX_TIMESTAMP = 35;
const PRODUCER_ID = 43;
const PRODUCER_EPOCH = 51;
const BASE_SEQUENCE = 53;
/** Idempotent-producer batches remembered per producer for duplicate detection (Kafka keeps 5). */
const PRODUCER_BATCHES = 5;
/** How much of the active segment a reopen scans to rebuild idempotent-producer state. */
const PRODUCER_SCAN_BYTES = 1024 * 1024;
/** Smallest possible RecordBatch v2 (header with zero records). */
export const BATCH_HEADER_SIZE = 61;
const INDEX_INTERVAL = 4096;
const INDEX_ENTRY = 12;

export interface LogConfig {
  /** Roll to a new segment past this size. */
  readonly segmentBytes: number;
  /** Delete old segments while the partition is larger than this; -1 keeps everything. */
  readonly retentionBytes: number;
  /** Delete segments whose newest write is older than this; -1 keeps everything. */
  readonly retentionMs: number;
}

export class InvalidBatchError extends Error {}

interface BatchHeader {
  base: number;
  length: number;
  lastDelta: number;
  maxTimestamp: number;
  producerId: number;
  producerEpoch: number;
  baseSequence: number;
}

interface ProducerState {
  epoch: number;
  batches: { firstSeq: number; lastSeq: number; baseOffset: number }[];
}

interface IndexEntry {
  offset: number;
  position: number;
}

class Segment {
  /** Offset after the last batch of this segment. */
  nextOffset: number;
  size = 0;
  private readonly entries: IndexEntry[] = [];
  private bytesSinceIndex = 0;
  private indexFd: number;
  closed = false;
  lastWriteMs: number;

  constructor(
    readonly baseOffset: number,
    readonly logPath: string,
    readonly indexPath: string,
    readonly fd: number,
  ) {
    this.nextOffset = baseOffset;
    this.indexFd = fs.openSync(indexPath, 'a+');
    this.lastWriteMs = Date.now();
  }

  static create(dir: string, baseOffset: number): Segment {
    const name = String(baseOffset).padStart(20, '0');
    const logPath = path.join(dir, `${name}.log`);
    const fd = fs.openSync(logPath, 'a+');
    return new Segment(baseOffset, logPath, path.join(dir, `${name}.index`), fd);
  }

  /** Opens an existing segment: trusts its index, then scans from the last entry to find the true end. */
  static open(dir: string, baseOffset: number): Segment {
    const seg = Segment.create(dir, baseOffset);
    seg.size = fs.fstatSync(seg.fd).size;
    seg.lastWriteMs = fs.fstatSync(seg.fd).mtimeMs;
    const raw = fs.readFileSync(seg.indexPath);
    for (let p = 0; p + INDEX_ENTRY <= raw.length; p += INDEX_ENTRY) {
      const entry = { offset: Number(raw.readBigInt64BE(p)), position: raw.readUInt32BE(p + 8) };
      if (entry.position >= seg.size) break;
      const head = seg.header(entry.position);
      if (!head || head.base !== entry.offset) break;
      seg.entries.push(entry);
    }
    if (seg.entries.length * INDEX_ENTRY !== raw.length) seg.rewriteIndex();
    const last = seg.entries[seg.entries.length - 1];
    let pos = last ? last.position : 0;
    let next = baseOffset;
    let sinceIndex = 0;
    while (pos < seg.size) {
      const head = seg.header(pos);
      if (!head || pos + head.length > seg.size) break;
      if (pos !== last?.position && (seg.entries.length === 0 || sinceIndex >= INDEX_INTERVAL)) {
        seg.addIndex(head.base, pos);
        sinceIndex = 0;
      }
      next = head.base + head.lastDelta + 1;
      pos += head.length;
      sinceIndex += head.length;
    }
    if (pos < seg.size) {
      // A torn write from a crash: drop the partial tail so the next append starts on a batch boundary.
      fs.ftruncateSync(seg.fd, pos);
      seg.size = pos;
    }
    seg.nextOffset = next;
    seg.bytesSinceIndex = sinceIndex;
    return seg;
  }

  private rewriteIndex(): void {
    const buf = Buffer.alloc(this.entries.length * INDEX_ENTRY);
    this.entries.forEach((e, i) => {
      buf.writeBigInt64BE(BigInt(e.offset), i * INDEX_ENTRY);
      buf.writeUInt32BE(e.position, i * INDEX_ENTRY + 8);
    });
    fs.ftruncateSync(this.indexFd, 0);
    fs.writeSync(this.indexFd, buf, 0, buf.length, 0);
  }

  private addIndex(offset: number, position: number): void {
    this.entries.push({ offset, position });
    const buf = Buffer.allocUnsafe(INDEX_ENTRY);
    buf.writeBigInt64BE(BigInt(offset), 0);
    buf.writeUInt32BE(position, 8);
    fs.writeSync(this.indexFd, buf);
  }

  /** Reads the fixed part of the batch header at `pos`, or undefined when it is not a valid batch. */
  header(pos: number): BatchHeader | undefined {
    if (pos + BATCH_HEADER_SIZE > this.size) return undefined;
    const buf = Buffer.allocUnsafe(BATCH_HEADER_SIZE);
    fs.readSync(this.fd, buf, 0, BATCH_HEADER_SIZE, pos);
    const length = buf.readInt32BE(BATCH_LENGTH) + 12;
    if (buf.readInt8(MAGIC) !== 2 || length < BATCH_HEADER_SIZE) return undefined;
    return {
      base: Number(buf.readBigInt64BE(BASE_OFFSET)),
      length,
      lastDelta: buf.readInt32BE(LAST_OFFSET_DELTA),
      maxTimestamp: Number(buf.readBigInt64BE(MAX_TIMESTAMP)),
      producerId: Number(buf.readBigInt64BE(PRODUCER_ID)),
      producerEpoch: buf.readInt16BE(PRODUCER_EPOCH),
      baseSequence: buf.readInt32BE(BASE_SEQUENCE),
    };
  }

  /** Calls `visit` for each batch header from the indexed position at or before `from` to the end. */
  scan(from: number, visit: (h: BatchHeader) => void): void {
    let pos = 0;
    for (const e of this.entries) if (e.position <= from) pos = e.position;
    while (pos < this.size) {
      const head = this.header(pos);
      if (!head) return;
      visit(head);
      pos += head.length;
    }
  }

  append(batch: Buffer, offset: number, nextOffset: number): void {
    try {
      const n = fs.writeSync(this.fd, batch, 0, batch.length, this.size);
      if (n !== batch.length) throw new Error(`short write: ${n} of ${batch.length} bytes`);
    } catch (err) {
      // Leave no partial batch behind (a full disk, say): the next append must start on a boundary.
      fs.ftruncateSync(this.fd, this.size);
      throw err;
    }
    if (this.entries.length === 0 || this.bytesSinceIndex >= INDEX_INTERVAL) {
      this.addIndex(offset, this.size);
      this.bytesSinceIndex = 0;
    }
    this.size += batch.length;
    this.bytesSinceIndex += batch.length;
    this.nextOffset = nextOffset;
    this.lastWriteMs = Date.now();
  }

  /** Position of the batch holding `offset` (which must lie in this segment), or -1 past the end. */
  find(offset: number): number {
    let lo = 0;
    let hi = this.entries.length - 1;
    let start = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const e = this.entries[mid]!;
      if (e.offset <= offset) {
        start = e.position;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    let pos = start;
    while (pos < this.size) {
      const head = this.header(pos);
      if (!head) return -1;
      if (head.base + head.lastDelta >= offset) return pos;
      pos += head.length;
    }
    return -1;
  }

  /** Whole batches from `pos`, at most `maxBytes` unless the first batch alone is larger. */
  read(pos: number, maxBytes: number): Buffer {
    const first = this.header(pos);
    if (!first) return Buffer.alloc(0);
    const want = Math.min(Math.max(maxBytes, first.length), this.size - pos);
    const buf = Buffer.allocUnsafe(want);
    const n = fs.readSync(this.fd, buf, 0, want, pos);
    let end = 0;
    while (end + BATCH_HEADER_SIZE <= n) {
      const len = buf.readInt32BE(end + BATCH_LENGTH) + 12;
      if (end + len > n) break;
      end += len;
    }
    return buf.subarray(0, end);
  }

  /** First offset of the first batch whose max timestamp is at or after `ts`, or undefined. */
  offsetForTimestamp(ts: number): number | undefined {
    let pos = 0;
    while (pos < this.size) {
      const head = this.header(pos);
      if (!head) return undefined;
      if (head.maxTimestamp >= ts) return head.base;
      pos += head.length;
    }
    return undefined;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
    fs.closeSync(this.indexFd);
  }

  remove(): void {
    this.close();
    fs.rmSync(this.logPath, { force: true });
    fs.rmSync(this.indexPath, { force: true });
  }
}

/** The append-only log of one topic partition. */
export class PartitionLog {
  private readonly segments: Segment[] = [];
  /** Recent batches of idempotent producers, so a retried batch is acknowledged, not appended twice. */
  private readonly producers = new Map<number, ProducerState>();
  /** Segments written since the last fsync. */
  readonly dirty = new Set<Segment>();

  private constructor(
    readonly dir: string,
    private config: LogConfig,
  ) {}

  static open(dir: string, config: LogConfig): PartitionLog {
    fs.mkdirSync(dir, { recursive: true });
    const log = new PartitionLog(dir, config);
    const bases = fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.log'))
      .map((f) => Number(f.slice(0, -4)))
      .sort((a, b) => a - b);
    bases.forEach((base, i) => {
      const seg = Segment.open(dir, base);
      const next = bases[i + 1];
      // A sealed segment ends where the next begins even if its own scan stopped short.
      if (next !== undefined && seg.nextOffset < next) seg.nextOffset = next;
      log.segments.push(seg);
    });
    if (log.segments.length === 0) log.segments.push(Segment.create(dir, 0));
    const active = log.active;
    active.scan(active.size - PRODUCER_SCAN_BYTES, (h) =>
      log.remember(h.producerId, h.producerEpoch, h.baseSequence, h.lastDelta, h.base),
    );
    return log;
  }

  private remember(
    producerId: number,
    epoch: number,
    firstSeq: number,
    lastDelta: number,
    baseOffset: number,
  ): void {
    if (producerId < 0 || firstSeq < 0) return;
    let state = this.producers.get(producerId);
    if (!state || state.epoch !== epoch) {
      state = { epoch, batches: [] };
      this.producers.set(producerId, state);
    }
    state.batches.push({ firstSeq, lastSeq: firstSeq + lastDelta, baseOffset });
    if (state.batches.length > PRODUCER_BATCHES) state.batches.shift();
  }

  /** The offset a batch already got when an idempotent producer retries it, else undefined. */
  private duplicateOf(batch: Buffer): number | undefined {
    const producerId = Number(batch.readBigInt64BE(PRODUCER_ID));
    if (producerId < 0) return undefined;
    const state = this.producers.get(producerId);
    if (!state || state.epoch !== batch.readInt16BE(PRODUCER_EPOCH)) return undefined;
    const firstSeq = batch.readInt32BE(BASE_SEQUENCE);
    const lastSeq = firstSeq + batch.readInt32BE(LAST_OFFSET_DELTA);
    return state.batches.find((b) => b.firstSeq === firstSeq && b.lastSeq === lastSeq)?.baseOffset;
  }

  setConfig(config: LogConfig): void {
    this.config = config;
  }

  private get active(): Segment {
    return this.segments[this.segments.length - 1]!;
  }

  /** The offset the next appended record gets (the high watermark: a single node commits at once). */
  get endOffset(): number {
    return this.active.nextOffset;
  }

  get startOffset(): number {
    return this.segments[0]!.baseOffset;
  }

  get sizeBytes(): number {
    return this.segments.reduce((n, s) => n + s.size, 0);
  }

  /**
   * Appends the batches of a Produce request's `records` field verbatim, setting only their base offset
   * and leader epoch (the CRC starts at `attributes`, so it stays valid). Returns the first offset.
   */
  append(records: Buffer): number {
    const batches: Buffer[] = [];
    let pos = 0;
    while (pos < records.length) {
      if (pos + BATCH_HEADER_SIZE > records.length) throw new InvalidBatchError('truncated record batch');
      if (records.readInt8(pos + MAGIC) !== 2) throw new InvalidBatchError('only RecordBatch v2 is accepted');
      const len = records.readInt32BE(pos + BATCH_LENGTH) + 12;
      if (len < BATCH_HEADER_SIZE || pos + len > records.length)
        throw new InvalidBatchError('bad batch length');
      batches.push(records.subarray(pos, pos + len));
      pos += len;
    }
    if (batches.length === 0) throw new InvalidBatchError('empty records');
    const duplicate = batches.length === 1 ? this.duplicateOf(batches[0]!) : undefined;
    if (duplicate !== undefined) return duplicate;
    const first = this.endOffset;
    for (const batch of batches) {
      const base = this.endOffset;
      const next = base + batch.readInt32BE(LAST_OFFSET_DELTA) + 1;
      if (this.active.size > 0 && this.active.size + batch.length > this.config.segmentBytes) {
        this.segments.push(Segment.create(this.dir, base));
      }
      batch.writeBigInt64BE(BigInt(base), BASE_OFFSET);
      batch.writeInt32BE(0, LEADER_EPOCH);
      this.active.append(batch, base, next);
      this.dirty.add(this.active);
      this.remember(
        Number(batch.readBigInt64BE(PRODUCER_ID)),
        batch.readInt16BE(PRODUCER_EPOCH),
        batch.readInt32BE(BASE_SEQUENCE),
        next - base - 1,
        base,
      );
    }
    return first;
  }

  /** Whole stored batches starting with the one that holds `offset`; empty at the end of the log. */
  read(offset: number, maxBytes: number): Buffer {
    for (let i = this.segments.length - 1; i >= 0; i--) {
      const seg = this.segments[i]!;
      if (seg.baseOffset > offset) continue;
      if (offset >= seg.nextOffset) {
        const after = this.segments[i + 1];
        if (!after) return Buffer.alloc(0);
        const pos = after.find(after.baseOffset);
        return pos < 0 ? Buffer.alloc(0) : after.read(pos, maxBytes);
      }
      const pos = seg.find(offset);
      return pos < 0 ? Buffer.alloc(0) : seg.read(pos, maxBytes);
    }
    return Buffer.alloc(0);
  }

  offsetForTimestamp(ts: number): number {
    for (const seg of this.segments) {
      const found = seg.offsetForTimestamp(ts);
      if (found !== undefined) return found;
    }
    return this.endOffset;
  }

  /** fdatasync every segment written since the last call. */
  async flush(): Promise<void> {
    const segs = [...this.dirty];
    this.dirty.clear();
    await Promise.all(
      segs.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.closed) resolve();
            else fs.fdatasync(s.fd, () => resolve());
          }),
      ),
    );
  }

  /** Deletes whole sealed segments past the size or age limit; returns how many were deleted. */
  enforceRetention(now = Date.now()): number {
    let deleted = 0;
    let total = this.sizeBytes;
    while (this.segments.length > 1) {
      const oldest = this.segments[0]!;
      const tooBig = this.config.retentionBytes >= 0 && total > this.config.retentionBytes;
      const tooOld = this.config.retentionMs >= 0 && now - oldest.lastWriteMs > this.config.retentionMs;
      if (!tooBig && !tooOld) break;
      total -= oldest.size;
      this.dirty.delete(oldest);
      oldest.remove();
      this.segments.shift();
      deleted++;
    }
    const active = this.active;
    if (
      this.segments.length === 1 &&
      active.size > 0 &&
      this.config.retentionMs >= 0 &&
      now - active.lastWriteMs > this.config.retentionMs
    ) {
      // Everything expired: roll so the old data can go, keeping offsets monotonic.
      this.segments.push(Segment.create(this.dir, active.nextOffset));
      this.dirty.delete(active);
      active.remove();
      this.segments.shift();
      deleted++;
    }
    return deleted;
  }

  close(): void {
    for (const s of this.segments) s.close();
  }

  /** Closes and deletes the partition's files. */
  destroy(): void {
    this.close();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
