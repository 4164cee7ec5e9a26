/**
 * The sandbox's durable key-value journal (`payrecon sandbox --data-dir DIR`). It knows nothing of the
 * sandbox: the caller names keys (`deposit:3000000001`, `ids`, `faults`, ...) as they change, and the
 * journal asks a `JournalSource` for their current value when it writes them, so a record moved three
 * times in one tick is written once.
 *
 * - Every line is `<crc32 hex>\t<json>\n`: `{"k": key, "v": value}` or `{"k": key, "d": 1}` (deleted).
 * - `sync()` resolves once everything marked so far is written and fdatasync'ed: the sandbox awaits it
 *   before answering a request or sending a notification, so nothing it answered can be lost. Marks
 *   made while a write is in flight go into the next write (group commit: one fdatasync for many).
 * - Recovery reads the newest complete snapshot, then the journal segments from its number on. A line
 *   that is cut short or fails its checksum ends the journal: it and everything after it are cut off
 *   (a torn tail: never acknowledged, since acknowledging waits for the fsync).
 * - When a segment outgrows `compactBytes`, writing moves to a new segment and a snapshot of the whole
 *   state is written beside it (`.tmp`, fsync, rename, fsync of the directory); older files go after.
 *   Replaying values over a snapshot taken while the state moved is harmless: each line carries a whole
 *   value, and the last one written for a key wins.
 * - `LOCK` holds the owner's pid: a second sandbox on the same directory is refused while the owner
 *   lives; a lock left by a killed process is taken over.
 */
import {
  closeSync,
  fsyncSync,
  openSync,
  readdirSync,
  readFileSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { type FileHandle, open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

export interface JournalSource {
  /** The current value of `key`, or undefined when it no longer exists. */
  get(key: string): unknown;
  /** Every live key and value (snapshots). */
  entries(): Iterable<[string, unknown]>;
}

export interface JournalOptions {
  /** Bytes of a journal segment that trigger a snapshot (default 64 MiB). */
  compactBytes?: number;
  /** Real milliseconds a mark may wait for a write when nobody calls `sync` (default 20). */
  flushDelayMs?: number;
  /** Skip fsync (benchmarks of the write cost without it only). */
  noSync?: boolean;
}

export interface JournalStats {
  writes: number;
  fsyncs: number;
  lines: number;
  bytes: number;
  snapshots: number;
}

export class JournalLockedError extends Error {
  readonly code = 'SANDBOX_DATA_DIR_LOCKED';
}

/** Reads and writes values with bigints (money) as `{"$n": "123"}`; `cachedBody` is never stored. */
export function encodeValue(value: unknown): string {
  return JSON.stringify(value, (k, v) =>
    typeof v === 'bigint' ? { $n: v.toString() } : k === 'cachedBody' ? undefined : v,
  );
}

export function decodeValue(text: string): unknown {
  return JSON.parse(text, (_k, v) => {
    if (v !== null && typeof v === 'object' && typeof v.$n === 'string' && Object.keys(v).length === 1) {
      return BigInt(v.$n);
    }
    return v;
  });
}

function frame(json: string): string {
  return `${crc32(json).toString(16).padStart(8, '0')}\t${json}\n`;
}

/** Parses framed lines; stops at the first torn or corrupt one. Returns the byte length of the good part. */
function readFramed(buf: Buffer, onLine: (json: string) => void): number {
  let offset = 0;
  while (offset < buf.length) {
    const nl = buf.indexOf(10, offset);
    if (nl < 0) break;
    const line = buf.subarray(offset, nl);
    if (line.length < 10 || line[8] !== 9) break;
    const crcText = line.subarray(0, 8).toString('latin1');
    const json = line.subarray(9);
    if (crc32(json).toString(16).padStart(8, '0') !== crcText) break;
    onLine(json.toString('utf8'));
    offset = nl + 1;
  }
  return offset;
}

const SNAPSHOT_END = '{"end":true}';

function segmentName(seq: number): string {
  return `journal-${String(seq).padStart(8, '0')}.jsonl`;
}
function snapshotName(seq: number): string {
  return `snapshot-${String(seq).padStart(8, '0')}.jsonl`;
}
function seqOf(name: string, prefix: string): number | null {
  const m = new RegExp(`^${prefix}-(\\d{8})\\.jsonl$`).exec(name);
  return m ? Number(m[1]) : null;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Takes `DIR/LOCK` for this process, or throws JournalLockedError when a live process holds it. */
function takeLock(dir: string): string {
  const path = join(dir, 'LOCK');
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeFileSync(fd, `${process.pid}\n`);
      fsyncSync(fd);
      closeSync(fd);
      return path;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      let pid = Number.NaN;
      try {
        pid = Number(readFileSync(path, 'utf8').trim());
      } catch {
        // Gone meanwhile: try again.
      }
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && pidAlive(pid)) {
        throw new JournalLockedError(`data directory ${dir} is in use by process ${pid}`);
      }
      try {
        unlinkSync(path);
      } catch {
        // Taken over by someone else meanwhile: the next try tells.
      }
    }
  }
  throw new JournalLockedError(`data directory ${dir}: could not take the lock`);
}

export interface Recovered {
  /** Every key's last value. */
  values: Map<string, unknown>;
  /** Lines replayed from journal segments (after the snapshot). */
  replayed: number;
  /** Bytes cut off the end of the last segment (a torn tail), 0 when clean. */
  tornBytes: number;
  /** True when the directory held no state. */
  fresh: boolean;
}

export class Journal {
  readonly dir: string;
  readonly stats: JournalStats = { writes: 0, fsyncs: 0, lines: 0, bytes: 0, snapshots: 0 };
  private source: JournalSource | null = null;
  private readonly options: Required<JournalOptions>;
  private readonly lockPath: string;
  private fh: FileHandle | null = null;
  private seq: number;
  private segmentBytes: number;
  /** Keys marked since the last write began. */
  private dirty = new Set<string>();
  private marked = 0;
  private durable = 0;
  private writing: Promise<void> | null = null;
  private waiters: { upTo: number; resolve: () => void; reject: (e: Error) => void }[] = [];
  private timer: NodeJS.Timeout | null = null;
  /** Holds (see `hold`): keys marked under each, and the mark number of its first key. */
  private readonly holds = new Map<number, { firstSeq: number; keys: Set<string> }>();
  /** Key -> number of live holds it is marked under (such a key is not written yet). */
  private readonly heldCount = new Map<string, number>();
  private nextHold = 1;
  private compacting = false;
  private snapshotting: Promise<void> = Promise.resolve();
  private failed: Error | null = null;
  private closed = false;

  private constructor(dir: string, lockPath: string, seq: number, bytes: number, options: JournalOptions) {
    this.dir = dir;
    this.lockPath = lockPath;
    this.seq = seq;
    this.segmentBytes = bytes;
    this.options = {
      compactBytes: options.compactBytes ?? 64 * 1024 * 1024,
      flushDelayMs: options.flushDelayMs ?? 20,
      noSync: options.noSync ?? false,
    };
  }

  /** Locks `dir` and reads its state; call `attach` before marking anything. */
  static async open(
    dir: string,
    options: JournalOptions = {},
  ): Promise<{ journal: Journal; recovered: Recovered }> {
    const { mkdirSync } = await import('node:fs');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const lockPath = takeLock(dir);
    try {
      const names = readdirSync(dir);
      for (const n of names) if (n.endsWith('.tmp')) unlinkSync(join(dir, n));
      const values = new Map<string, unknown>();
      const apply = (json: string) => {
        const entry = decodeValue(json) as { k?: unknown; v?: unknown; d?: 1 };
        if (typeof entry.k !== 'string') return;
        if (entry.d) values.delete(entry.k);
        else values.set(entry.k, entry.v);
      };
      // The newest complete snapshot.
      const snapshots = names
        .map((n) => seqOf(n, 'snapshot'))
        .filter((s): s is number => s !== null)
        .sort((a, b) => b - a);
      let base = 0;
      for (const s of snapshots) {
        const buf = readFileSync(join(dir, snapshotName(s)));
        const lines: string[] = [];
        readFramed(buf, (json) => lines.push(json));
        if (lines[lines.length - 1] !== SNAPSHOT_END) continue;
        for (const json of lines.slice(0, -1)) apply(json);
        base = s;
        break;
      }
      const segments = names
        .map((n) => seqOf(n, 'journal'))
        .filter((s): s is number => s !== null && s >= base)
        .sort((a, b) => a - b);
      let replayed = 0;
      let tornBytes = 0;
      let lastSeq = base;
      let lastBytes = 0;
      for (let i = 0; i < segments.length; i++) {
        const s = segments[i]!;
        const path = join(dir, segmentName(s));
        const buf = readFileSync(path);
        const good = readFramed(buf, (json) => {
          apply(json);
          replayed++;
        });
        if (good < buf.length) {
          // A torn tail: nothing after it was ever acknowledged. Cut it, and drop later segments.
          tornBytes += buf.length - good;
          const fd = openSync(path, 'r+');
          try {
            (await import('node:fs')).ftruncateSync(fd, good);
            fsyncSync(fd);
          } finally {
            closeSync(fd);
          }
          for (const later of segments.slice(i + 1)) unlinkSync(join(dir, segmentName(later)));
          lastSeq = s;
          lastBytes = good;
          break;
        }
        lastSeq = s;
        lastBytes = good;
      }
      const fresh = values.size === 0 && snapshots.length === 0 && segments.length === 0;
      const journal = new Journal(dir, lockPath, Math.max(lastSeq, 1), lastBytes, options);
      journal.fh = await open(join(dir, segmentName(journal.seq)), 'a', 0o600);
      if (fresh) fsyncDir(dir);
      return { journal, recovered: { values, replayed, tornBytes, fresh } };
    } catch (err) {
      try {
        unlinkSync(lockPath);
      } catch {
        // Best effort.
      }
      throw err;
    }
  }

  /** Where current values come from. */
  attach(source: JournalSource): void {
    this.source = source;
  }

  /**
   * Notes that `key` changed (or was deleted); it is written with the next group, or, when marked under
   * a live `hold`, with the first group after the hold's release.
   */
  mark(key: string, hold?: number): void {
    if (this.closed) return;
    this.dirty.add(key);
    this.marked++;
    const h = hold === undefined ? undefined : this.holds.get(hold);
    if (h) {
      if (h.firstSeq === 0) h.firstSeq = this.marked;
      if (!h.keys.has(key)) {
        h.keys.add(key);
        this.heldCount.set(key, (this.heldCount.get(key) ?? 0) + 1);
      }
    }
    if (this.writing === null) this.arm();
  }

  /**
   * Opens a hold: keys marked under it are written together with whatever is marked before its
   * `release` (an idempotent creation holds its entity until its answer is known, so the entity and
   * the idempotency key reach the disk in one group: never the entity without its key). `sync` waits
   * for held keys like any other.
   */
  hold(): number {
    const token = this.nextHold++;
    this.holds.set(token, { firstSeq: 0, keys: new Set() });
    return token;
  }

  release(token: number): void {
    const h = this.holds.get(token);
    if (!h) return;
    this.holds.delete(token);
    for (const k of h.keys) {
      const n = (this.heldCount.get(k) ?? 1) - 1;
      if (n > 0) this.heldCount.set(k, n);
      else this.heldCount.delete(k);
    }
    if (this.writing === null && !this.closed) {
      if (this.waiters.length > 0) this.kick();
      else if (this.dirty.size > 0) this.arm();
    }
  }

  /** Marks below this number are on disk once everything written so far is (held keys are not). */
  private durableLimit(): number {
    let limit = this.marked;
    for (const h of this.holds.values()) if (h.firstSeq > 0) limit = Math.min(limit, h.firstSeq - 1);
    return limit;
  }

  private writable(): boolean {
    if (this.heldCount.size === 0) return this.dirty.size > 0;
    for (const k of this.dirty) if (!this.heldCount.has(k)) return true;
    return false;
  }

  private arm(): void {
    if (this.timer !== null) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.kick();
    }, this.options.flushDelayMs);
    this.timer.unref();
  }

  /** True when nothing marked is waiting to be written. */
  get clean(): boolean {
    return this.durable === this.marked;
  }

  /** Resolves when everything marked so far is on disk. */
  sync(): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (this.durable === this.marked) return Promise.resolve();
    const upTo = this.marked;
    return new Promise<void>((resolve, reject) => {
      this.waiters.push({ upTo, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.writing !== null || this.closed || !this.writable()) return;
    this.writing = this.writeGroup()
      .catch(() => {
        // `failed` is set and every waiter rejected; later syncs reject too.
      })
      .finally(() => {
        this.writing = null;
        if (this.writable()) {
          if (this.waiters.length > 0) this.kick();
          else this.arm();
        }
      });
  }

  private async writeGroup(): Promise<void> {
    const upTo = this.durableLimit();
    let keys = this.dirty;
    this.dirty = new Set();
    if (this.heldCount.size > 0) {
      const free = new Set<string>();
      for (const k of keys) (this.heldCount.has(k) ? this.dirty : free).add(k);
      keys = free;
    }
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    let text = '';
    let lines = 0;
    for (const key of keys) {
      const value = this.source?.get(key);
      text += frame(value === undefined ? encodeValue({ k: key, d: 1 }) : encodeValue({ k: key, v: value }));
      lines++;
    }
    try {
      const buf = Buffer.from(text, 'utf8');
      await this.fh!.write(buf);
      if (!this.options.noSync) {
        await this.fh!.datasync();
        this.stats.fsyncs++;
      }
      this.stats.writes++;
      this.stats.lines += lines;
      this.stats.bytes += buf.length;
      this.segmentBytes += buf.length;
    } catch (err) {
      this.failed = err as Error;
      for (const w of this.waiters.splice(0)) w.reject(this.failed);
      throw err;
    }
    this.durable = Math.max(this.durable, upTo);
    const still: typeof this.waiters = [];
    for (const w of this.waiters) (w.upTo <= this.durable ? w.resolve : () => still.push(w))();
    this.waiters = still;
    if (this.segmentBytes >= this.options.compactBytes && !this.compacting) {
      this.compacting = true;
      await this.startSnapshot();
    }
  }

  /**
   * Moves writing to a new segment and writes a snapshot beside it (the next groups go to the new
   * segment while the snapshot is written).
   */
  private async startSnapshot(): Promise<void> {
    const next = this.seq + 1;
    const old = this.fh!;
    this.fh = await open(join(this.dir, segmentName(next)), 'a', 0o600);
    this.seq = next;
    this.segmentBytes = 0;
    await old.close();
    fsyncDir(this.dir);
    this.snapshotting = this.writeSnapshot(next)
      .catch(() => {
        // A failed snapshot leaves the older one and the journal: recovery still works.
      })
      .finally(() => {
        this.compacting = false;
      });
  }

  /** Writes the whole state as snapshot `seq` (also used on close). */
  async writeSnapshot(seq: number): Promise<void> {
    if (!this.source) return;
    const tmp = join(this.dir, `${snapshotName(seq)}.tmp`);
    const fh = await open(tmp, 'w', 0o600);
    try {
      let chunk = '';
      let n = 0;
      for (const [k, v] of this.source.entries()) {
        chunk += frame(encodeValue({ k, v }));
        if (++n % 2000 === 0) {
          await fh.write(chunk);
          chunk = '';
        }
      }
      chunk += frame(SNAPSHOT_END);
      await fh.write(chunk);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, join(this.dir, snapshotName(seq)));
    fsyncDir(this.dir);
    this.stats.snapshots++;
    for (const name of readdirSync(this.dir)) {
      const s = seqOf(name, 'snapshot') ?? seqOf(name, 'journal');
      if (s !== null && s < seq) await unlink(join(this.dir, name)).catch(() => undefined);
    }
  }

  /** Writes what is marked, then a snapshot (so the next start reads one file), and unlocks. */
  async close(options: { snapshot?: boolean } = {}): Promise<void> {
    if (this.closed) return;
    try {
      for (const token of [...this.holds.keys()]) this.release(token);
      while (this.writing) await this.writing;
      await this.snapshotting;
      while (this.writing) await this.writing;
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      if (!this.failed && this.dirty.size > 0) {
        await this.writeGroup().catch(() => undefined);
      }
      this.closed = true;
      if (!this.failed && options.snapshot !== false) {
        const next = this.seq + 1;
        await this.fh?.close();
        this.fh = null;
        await this.writeSnapshot(next);
      }
    } finally {
      this.closed = true;
      await this.fh?.close().catch(() => undefined);
      this.fh = null;
      try {
        unlinkSync(this.lockPath);
      } catch {
        // Already gone.
      }
    }
  }
}
