/**
 * The registry's state and its durability. Every change (a schema version registered, a compatibility
 * level set or removed, a subject deleted) is one JSON line appended to `registry.log` under the data
 * directory and fsynced before the HTTP answer goes out; at start the log is replayed. So ids and
 * versions survive a restart and are never reused. A torn last line (a crash mid-write) is ignored:
 * its request was never acknowledged.
 */
import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';

export const COMPATIBILITY_LEVELS = [
  'NONE',
  'BACKWARD',
  'BACKWARD_TRANSITIVE',
  'FORWARD',
  'FORWARD_TRANSITIVE',
  'FULL',
  'FULL_TRANSITIVE',
] as const;
export type CompatibilityLevel = (typeof COMPATIBILITY_LEVELS)[number];

export function isCompatibilityLevel(value: unknown): value is CompatibilityLevel {
  return typeof value === 'string' && (COMPATIBILITY_LEVELS as readonly string[]).includes(value);
}

export interface SchemaReference {
  name: string;
  subject: string;
  version: number;
}

export interface StoredSchema {
  id: number;
  schemaType: string;
  /** The schema text in its canonical (minified) form; ids are per distinct canonical text. */
  schema: string;
  references: SchemaReference[];
}

export interface SubjectVersion {
  subject: string;
  version: number;
  id: number;
  deleted: boolean;
}

type LogRecord =
  | {
      op: 'schema';
      id: number;
      subject: string;
      version: number;
      schemaType: string;
      schema: string;
      references: SchemaReference[];
    }
  | { op: 'config'; subject: string | null; compatibility: CompatibilityLevel | null }
  | { op: 'delete-subject'; subject: string }
  | { op: 'delete-version'; subject: string; version: number };

export const DEFAULT_COMPATIBILITY: CompatibilityLevel = 'BACKWARD';

export class RegistryStore {
  private readonly schemasById = new Map<number, StoredSchema>();
  private readonly idByText = new Map<string, number>();
  private readonly subjects = new Map<string, SubjectVersion[]>();
  private readonly configs = new Map<string, CompatibilityLevel>();
  private globalCompatibility: CompatibilityLevel = DEFAULT_COMPATIBILITY;
  private nextId = 1;
  private fd: number | null = null;

  private constructor(private readonly logPath: string) {}

  static open(dataDir: string): RegistryStore {
    mkdirSync(dataDir, { recursive: true });
    const lockPath = join(dataDir, 'registry.lock');
    takeLock(lockPath);
    try {
      const store = new RegistryStore(join(dataDir, 'registry.log'));
      store.lockPath = lockPath;
      store.replay();
      store.fd = openSync(store.logPath, 'a');
      return store;
    } catch (err) {
      rmSync(lockPath, { force: true });
      throw err;
    }
  }

  private lockPath: string | null = null;

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
    if (this.lockPath !== null) rmSync(this.lockPath, { force: true });
    this.lockPath = null;
  }

  private replay(): void {
    let text: string;
    try {
      text = readFileSync(this.logPath, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    const lines = text.split('\n');
    lines.forEach((line, index) => {
      if (line.trim() === '') return;
      let record: LogRecord;
      try {
        record = JSON.parse(line) as LogRecord;
      } catch (err) {
        // Only the last line can be torn by a crash; anything else is a damaged log.
        if (index >= lines.length - 2) return;
        throw new Error(`registry log ${this.logPath} line ${index + 1} is not JSON`, { cause: err });
      }
      this.apply(record);
    });
  }

  private append(record: LogRecord): void {
    if (this.fd === null) throw new Error('registry store is closed');
    writeSync(this.fd, `${JSON.stringify(record)}\n`);
    fsyncSync(this.fd);
    this.apply(record);
  }

  private apply(record: LogRecord): void {
    switch (record.op) {
      case 'schema': {
        if (!this.schemasById.has(record.id)) {
          this.schemasById.set(record.id, {
            id: record.id,
            schemaType: record.schemaType,
            schema: record.schema,
            references: record.references,
          });
          this.idByText.set(textKey(record.schemaType, record.schema, record.references), record.id);
        }
        this.nextId = Math.max(this.nextId, record.id + 1);
        const versions = this.subjects.get(record.subject) ?? [];
        versions.push({ subject: record.subject, version: record.version, id: record.id, deleted: false });
        this.subjects.set(record.subject, versions);
        return;
      }
      case 'config':
        if (record.subject === null) {
          this.globalCompatibility = record.compatibility ?? DEFAULT_COMPATIBILITY;
        } else if (record.compatibility === null) {
          this.configs.delete(record.subject);
        } else {
          this.configs.set(record.subject, record.compatibility);
        }
        return;
      case 'delete-subject':
        for (const v of this.subjects.get(record.subject) ?? []) v.deleted = true;
        return;
      case 'delete-version':
        for (const v of this.subjects.get(record.subject) ?? []) {
          if (v.version === record.version) v.deleted = true;
        }
        return;
    }
  }

  // ---- reads

  subjectNames(includeDeleted = false): string[] {
    return [...this.subjects.entries()]
      .filter(([, versions]) => includeDeleted || versions.some((v) => !v.deleted))
      .map(([name]) => name)
      .sort();
  }

  /** Live (not deleted) versions of a subject, oldest first; empty when the subject is unknown. */
  versions(subject: string): SubjectVersion[] {
    return (this.subjects.get(subject) ?? []).filter((v) => !v.deleted);
  }

  schemaById(id: number): StoredSchema | undefined {
    return this.schemasById.get(id);
  }

  idOf(schemaType: string, schema: string, references: SchemaReference[]): number | undefined {
    return this.idByText.get(textKey(schemaType, schema, references));
  }

  subjectsOfId(id: number): SubjectVersion[] {
    const out: SubjectVersion[] = [];
    for (const versions of this.subjects.values()) {
      for (const v of versions) if (v.id === id && !v.deleted) out.push(v);
    }
    return out;
  }

  subjectCompatibility(subject: string): CompatibilityLevel | undefined {
    return this.configs.get(subject);
  }

  globalConfig(): CompatibilityLevel {
    return this.globalCompatibility;
  }

  effectiveCompatibility(subject: string): CompatibilityLevel {
    return this.configs.get(subject) ?? this.globalCompatibility;
  }

  // ---- writes

  /** Adds a version of `schema` to `subject`, reusing the global id of an identical schema. */
  addVersion(
    subject: string,
    schemaType: string,
    schema: string,
    references: SchemaReference[],
  ): SubjectVersion {
    const id = this.idOf(schemaType, schema, references) ?? this.nextId;
    // Versions keep counting past deleted ones, as Confluent's registry does.
    const all = this.subjects.get(subject) ?? [];
    const version = all.reduce((max, v) => Math.max(max, v.version), 0) + 1;
    this.append({ op: 'schema', id, subject, version, schemaType, schema, references });
    return { subject, version, id, deleted: false };
  }

  setCompatibility(subject: string | null, compatibility: CompatibilityLevel | null): void {
    this.append({ op: 'config', subject, compatibility });
  }

  deleteSubject(subject: string): number[] {
    const live = this.versions(subject).map((v) => v.version);
    this.append({ op: 'delete-subject', subject });
    return live;
  }

  deleteVersion(subject: string, version: number): void {
    this.append({ op: 'delete-version', subject, version });
  }
}

/**
 * One registry per data directory: two appending to one log would hand out the same id twice. The
 * lock file holds the owner's pid; a lock whose process is gone (a crash) is taken over.
 */
function takeLock(lockPath: string): void {
  for (let tries = 0; tries < 2; tries++) {
    try {
      writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let owner = Number.NaN;
    try {
      owner = Number(readFileSync(lockPath, 'utf8').trim());
    } catch {
      // Removed in between: try again.
    }
    if (Number.isInteger(owner) && owner > 0 && isAlive(owner)) {
      throw new Error(`registry data directory is in use by process ${owner} (${lockPath})`);
    }
    rmSync(lockPath, { force: true });
  }
  throw new Error(`could not lock ${lockPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function textKey(schemaType: string, schema: string, references: SchemaReference[]): string {
  return JSON.stringify([schemaType, schema, references]);
}
