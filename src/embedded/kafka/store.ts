/**
 * The broker's durable state besides the logs: topic metadata (`topics.json`, replaced atomically) and
 * committed group offsets (`offsets.log`, an append-only journal of JSON lines compacted on open).
 */
import fs from 'node:fs';
import path from 'node:path';
import { type LogConfig, PartitionLog } from './log.ts';

export interface TopicMeta {
  readonly name: string;
  readonly partitions: number;
  readonly configs: Record<string, string>;
}

export interface Topic extends TopicMeta {
  readonly logs: PartitionLog[];
}

export interface CommittedOffset {
  readonly offset: number;
  readonly metadata: string | null;
}

const TOPIC_NAME = /^[a-zA-Z0-9._-]{1,249}$/;

export function isValidTopicName(name: string): boolean {
  return TOPIC_NAME.test(name) && name !== '.' && name !== '..';
}

function writeFileAtomic(file: string, data: string): void {
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w');
  fs.writeSync(fd, data);
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  fs.renameSync(tmp, file);
}

function numberConfig(configs: Record<string, string>, key: string, fallback: number): number {
  const v = configs[key];
  const n = v === undefined ? Number.NaN : Number(v);
  return Number.isFinite(n) ? n : fallback;
}

export class TopicStore {
  readonly topics = new Map<string, Topic>();
  private readonly file: string;

  constructor(
    private readonly dataDir: string,
    private readonly defaults: LogConfig,
  ) {
    this.file = path.join(dataDir, 'topics.json');
    fs.mkdirSync(path.join(dataDir, 'topics'), { recursive: true });
    if (fs.existsSync(this.file)) {
      const metas = JSON.parse(fs.readFileSync(this.file, 'utf8')) as TopicMeta[];
      for (const meta of metas) this.load(meta);
    }
  }

  logConfig(configs: Record<string, string>): LogConfig {
    return {
      segmentBytes: numberConfig(configs, 'segment.bytes', this.defaults.segmentBytes),
      retentionBytes: numberConfig(configs, 'retention.bytes', this.defaults.retentionBytes),
      retentionMs: numberConfig(configs, 'retention.ms', this.defaults.retentionMs),
    };
  }

  private load(meta: TopicMeta): Topic {
    const config = this.logConfig(meta.configs);
    const logs: PartitionLog[] = [];
    for (let p = 0; p < meta.partitions; p++) {
      logs.push(PartitionLog.open(path.join(this.dataDir, 'topics', meta.name, String(p)), config));
    }
    const topic = { ...meta, logs };
    this.topics.set(meta.name, topic);
    return topic;
  }

  private save(): void {
    const metas: TopicMeta[] = [...this.topics.values()].map(({ name, partitions, configs }) => ({
      name,
      partitions,
      configs,
    }));
    writeFileAtomic(this.file, JSON.stringify(metas, null, 1));
  }

  create(name: string, partitions: number, configs: Record<string, string> = {}): Topic {
    // A leftover directory from a deleted topic must not leak old batches into the new one.
    fs.rmSync(path.join(this.dataDir, 'topics', name), { recursive: true, force: true });
    const topic = this.load({ name, partitions, configs });
    this.save();
    return topic;
  }

  /** Raises a topic's partition count to `partitions` (never lowers it); existing partitions stay. */
  addPartitions(name: string, partitions: number): Topic {
    const topic = this.topics.get(name);
    if (!topic) throw new Error(`unknown topic ${name}`);
    if (partitions <= topic.partitions) return topic;
    const config = this.logConfig(topic.configs);
    const logs = [...topic.logs];
    for (let p = topic.partitions; p < partitions; p++) {
      logs.push(PartitionLog.open(path.join(this.dataDir, 'topics', name, String(p)), config));
    }
    const raised = { ...topic, partitions, logs };
    this.topics.set(name, raised);
    this.save();
    return raised;
  }

  delete(name: string): boolean {
    const topic = this.topics.get(name);
    if (!topic) return false;
    this.topics.delete(name);
    this.save();
    for (const log of topic.logs) log.destroy();
    fs.rmSync(path.join(this.dataDir, 'topics', name), { recursive: true, force: true });
    return true;
  }

  close(): void {
    for (const t of this.topics.values()) for (const log of t.logs) log.close();
  }
}

/** Committed offsets per group, topic and partition, kept after a group empties. */
export class OffsetStore {
  private readonly groups = new Map<string, Map<string, CommittedOffset>>();
  private readonly file: string;
  private fd: number;
  private lines = 0;
  dirty = false;

  constructor(dataDir: string) {
    this.file = path.join(dataDir, 'offsets.log');
    if (fs.existsSync(this.file)) {
      for (const line of fs.readFileSync(this.file, 'utf8').split('\n')) {
        if (!line) continue;
        try {
          const e = JSON.parse(line) as { g: string; t: string; p: number; o: number; m: string | null };
          this.set(e.g, e.t, e.p, { offset: e.o, metadata: e.m });
          this.lines++;
        } catch {
          // A torn last line from a crash: the commit was never acknowledged.
        }
      }
    }
    this.compact();
    this.fd = fs.openSync(this.file, 'a');
  }

  private count(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.size;
    return n;
  }

  private compact(): void {
    const out: string[] = [];
    for (const [g, offsets] of this.groups) {
      for (const [key, c] of offsets) {
        const sep = key.lastIndexOf('\u0000');
        out.push(
          JSON.stringify({
            g,
            t: key.slice(0, sep),
            p: Number(key.slice(sep + 1)),
            o: c.offset,
            m: c.metadata,
          }),
        );
      }
    }
    writeFileAtomic(this.file, out.length ? `${out.join('\n')}\n` : '');
    this.lines = out.length;
  }

  private set(group: string, topic: string, partition: number, c: CommittedOffset): void {
    let offsets = this.groups.get(group);
    if (!offsets) {
      offsets = new Map();
      this.groups.set(group, offsets);
    }
    offsets.set(`${topic}\u0000${partition}`, c);
  }

  get(group: string, topic: string, partition: number): CommittedOffset | undefined {
    return this.groups.get(group)?.get(`${topic}\u0000${partition}`);
  }

  /** All committed partitions of a group, by topic. */
  list(group: string): Map<string, Map<number, CommittedOffset>> {
    const out = new Map<string, Map<number, CommittedOffset>>();
    for (const [key, c] of this.groups.get(group) ?? []) {
      const sep = key.lastIndexOf('\u0000');
      const topic = key.slice(0, sep);
      let parts = out.get(topic);
      if (!parts) {
        parts = new Map();
        out.set(topic, parts);
      }
      parts.set(Number(key.slice(sep + 1)), c);
    }
    return out;
  }

  hasGroup(group: string): boolean {
    return (this.groups.get(group)?.size ?? 0) > 0;
  }

  groupIds(): string[] {
    return [...this.groups.keys()];
  }

  commit(
    entries: { group: string; topic: string; partition: number; offset: number; metadata: string | null }[],
  ) {
    if (entries.length === 0) return;
    const lines: string[] = [];
    for (const e of entries) {
      this.set(e.group, e.topic, e.partition, { offset: e.offset, metadata: e.metadata });
      lines.push(JSON.stringify({ g: e.group, t: e.topic, p: e.partition, o: e.offset, m: e.metadata }));
    }
    fs.writeSync(this.fd, `${lines.join('\n')}\n`);
    this.lines += lines.length;
    this.dirty = true;
    if (this.lines > 100_000 && this.lines > 4 * this.count()) {
      fs.closeSync(this.fd);
      this.compact();
      this.fd = fs.openSync(this.file, 'a');
    }
  }

  async flush(): Promise<void> {
    if (!this.dirty) return;
    this.dirty = false;
    const fd = this.fd;
    await new Promise<void>((resolve) => fs.fdatasync(fd, () => resolve()));
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
