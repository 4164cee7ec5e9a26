/**
 * The secrets scanner: looks for the known secrets of a run, and for anything that looks like card data
 * or a key, in every place payrecon writes to (captured log output, every column of every table, every
 * message of every topic, the workbooks and CSVs of the report runner) and answers each finding with
 * its location. Used by `test/audit/secrets-audit.test.ts` and by the chaos soak after its run.
 *
 * ```ts
 * const hits = await scanForSecrets({
 *   secrets: [{ label: 'deposit secret', value: account.depositSecret }, { label: 'cvv', value: '123', kind: 'cvv' }],
 *   logs: [{ name: 'pipeline', text: capturedPinoLines }],
 *   database: { url: databaseUrl },
 *   kafka: { brokers: ['127.0.0.1:9092'], registryUrl: 'http://127.0.0.1:8081' },
 *   files: [join(dataDir, 'reports')],
 * });
 * expect(hits).toEqual([]);
 * ```
 *
 * Options (`ScanOptions`):
 * - `secrets`: the known secrets of the run, each `{ label, value }` (account secret keys, API passwords
 *   and keys, web passwords, card numbers, signatures and Authorization / Payload-Signature values seen on
 *   the wire). Each is looked for as is, JSON-escaped, URL-encoded (both `%20` and `+` forms),
 *   XML-escaped, and for hex values in both letter cases. Values shorter than 6 characters cannot be
 *   told from ordinary text and are skipped (counted in `stats.skippedSecrets`), except `kind: 'cvv'`,
 *   which is looked for only as the value of a cvv/cvc-named field.
 * - `logs`: captured log text, `{ name, text }` (pino lines, one JSON object a line); `logFiles`: paths.
 * - `database`: `{ url, schemas? }`: every column of every base table of every schema (default: all but
 *   `pg_catalog` and `information_schema`), read generically from `information_schema.columns`, each
 *   value cast to text (`bytea` through `encode(.., 'escape')`, so bytes stay readable).
 * - `kafka`: `{ brokers, registryUrl?, topics?, timeoutMs? }`: every topic (default every topic the
 *   broker lists, DLQs included, but `__`-internal ones) read from its low to its high watermark: key,
 *   headers and value as raw bytes, and the value decoded from Avro through the registry when it is in
 *   the Confluent wire format. A topic that cannot be read to its end within `timeoutMs` (default 60 s)
 *   fails the scan (an incomplete scan must not pass as clean).
 * - `files`: files or directories (walked recursively): `.xlsx` unzipped and every XML part scanned
 *   (entities decoded), and every cell read with exceljs; anything else scanned as text.
 * - `detectors`: `{ luhn, cvv, pem }`, all on by default: Luhn-valid 13-19 digit runs that start like a
 *   card (2-6; runs of 4-digit groups split by one space or dash count too; a run touching a letter or
 *   another digit does not, so hashes and epoch-millisecond times are not cards); cvv/cvc/csc-named
 *   fields holding 3-4 digits (in text `name: 123`, `"name":"123"`, `name=123`; in tables a column so
 *   named; in workbooks a column so headed); PEM `-----BEGIN ... KEY-----` blocks.
 * - `ignore(hit)`: drop a known false positive (say why where you use it).
 * - `stats`: an object filled with what was scanned and how long each part took (figures for
 *   docs/reliability.md).
 */
import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { SchemaRegistry } from '@kafkajs/confluent-schema-registry';
import ExcelJS from 'exceljs';
import JSZip from 'jszip';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';

export interface KnownSecret {
  label: string;
  value: string;
  /** `cvv`: a short code, looked for only as the value of a cvv/cvc-named field. */
  kind?: 'cvv';
}

export type Place = 'log' | 'database' | 'topic' | 'file';
export type Detector = 'known' | 'luhn' | 'cvv' | 'pem';

export interface Hit {
  detector: Detector;
  /** The known secret's label, or what the generic detector saw (masked). */
  label: string;
  place: Place;
  /** Where: `log <name>:<line>`, `<schema>.<table>.<column> ctid (p,i)`, `<topic>[p]@offset value`, `<file>!<part>`. */
  location: string;
  /** Up to 40 characters either side, the match itself masked. */
  excerpt: string;
}

export interface ScanStats {
  skippedSecrets: string[];
  secretPatterns: number;
  logs: number;
  logLines: number;
  logBytes: number;
  tables: number;
  rows: number;
  /** Column values read (rows x columns, nulls included). */
  values: number;
  databaseBytes: number;
  topics: number;
  messages: number;
  messageBytes: number;
  /** Messages decoded from Avro through the registry. */
  decoded: number;
  files: number;
  fileBytes: number;
  workbooks: number;
  /** XML parts of the workbooks scanned. */
  xmlParts: number;
  /** Non-empty workbook cells read through exceljs. */
  cells: number;
  /** Wall time of each part of the scan, in milliseconds (where a long scan spends its time). */
  ms: { logs: number; database: number; topics: number; files: number };
}

export interface ScanOptions {
  secrets: readonly KnownSecret[];
  logs?: readonly { name: string; text: string }[];
  logFiles?: readonly string[];
  database?: { url: string; schemas?: readonly string[] };
  kafka?: {
    brokers: readonly string[];
    registryUrl?: string;
    topics?: readonly string[];
    timeoutMs?: number;
  };
  files?: readonly string[];
  detectors?: { luhn?: boolean; cvv?: boolean; pem?: boolean };
  ignore?: (hit: Hit) => boolean;
  stats?: ScanStats;
}

export function emptyStats(): ScanStats {
  return {
    skippedSecrets: [],
    secretPatterns: 0,
    logs: 0,
    logLines: 0,
    logBytes: 0,
    tables: 0,
    rows: 0,
    values: 0,
    databaseBytes: 0,
    topics: 0,
    messages: 0,
    messageBytes: 0,
    decoded: 0,
    files: 0,
    fileBytes: 0,
    workbooks: 0,
    xmlParts: 0,
    cells: 0,
    ms: { logs: 0, database: 0, topics: 0, files: 0 },
  };
}

const MIN_SECRET_LENGTH = 6;
const CVV_NAME = '[A-Za-z0-9_]*(?:cvv|cvc|csc)[A-Za-z0-9_]*';
const CVV_FIELD = new RegExp(String.raw`(${CVV_NAME})["']?\s*[:=]\s*["']?(\d{3,4})(?![0-9])`, 'gi');
const CVV_COLUMN = new RegExp(`^${CVV_NAME}$`, 'i');
// CVV_FIELD backtracks through every run of letters and digits (quadratic in a long hex or base64 run:
// ~0.2 ms a message), and can only match where one of these names occurs: tested first, same findings.
const CVV_HINT = /cvv|cvc|csc/i;
const PEM = /-----BEGIN [A-Z0-9 ]*KEY(?: BLOCK)?-----/g;
// Contiguous digit runs, or 4-digit groups split by one space or dash, not touching a letter or digit.
const DIGIT_RUN =
  /(?<![0-9A-Za-z])(?:\d{13,19}|\d{4}(?:[ -]\d{4}){2}[ -]\d{1,7}|\d{4}[ -]\d{6}[ -]\d{4,5})(?![0-9A-Za-z])/g;

export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

function xmlEscape(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function xmlDecode(s: string): string {
  return s
    .replace(/&#x([0-9a-f]+);/gi, (_, h: string) => String.fromCodePoint(Number.parseInt(h, 16)))
    .replace(/&#(\d+);/g, (_, d: string) => String.fromCodePoint(Number(d)))
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** The forms a known secret can take once written somewhere, in the order they are looked for. */
export function variants(value: string): string[] {
  const out = new Set<string>([value]);
  out.add(JSON.stringify(value).slice(1, -1));
  out.add(encodeURIComponent(value));
  out.add(new URLSearchParams({ v: value }).toString().slice(2));
  out.add(xmlEscape(value));
  if (/^[0-9a-fA-F]+$/.test(value)) {
    out.add(value.toLowerCase());
    out.add(value.toUpperCase());
  }
  return [...out].filter((v) => v.length > 0);
}

function mask(s: string): string {
  if (s.length <= 4) return '*'.repeat(s.length);
  return `${s.slice(0, 2)}${'*'.repeat(Math.min(s.length - 4, 12))}${s.slice(-2)}`;
}

/** A needle found in a text: its position in the list given to `NeedleSearch`, and its first index. */
export interface Occurrence {
  needle: number;
  index: number;
}

/** States with at least this many children get a dense row (one lookup); fewer are scanned in order. */
const DENSE_CHILDREN = 8;
/** At most this many dense cells (4 bytes each); beyond, wide states are binary-searched. */
const DENSE_BUDGET = 16_000_000;

/**
 * Multi-needle search: an Aho-Corasick automaton over UTF-16 code units (the units `indexOf`
 * compares), built once from every needle. One pass over a text finds every needle that occurs in it,
 * each with the index of its first occurrence, which is what `text.indexOf(needle)` answers. The pass
 * costs the text's length whatever the number of needles, where one `indexOf` per needle cost the
 * text's length times the needles (the chaos soak's ~8,000 needles over every message made hours).
 *
 * Layout: states are numbered breadth-first, so the children of a state are consecutive (`firstChild`,
 * `childCount`) in ascending label order. Labels are code units renumbered 1..K over the units the
 * needles use (`classOf`; 0: a unit no needle holds, which sends the search back to the root).
 */
export class NeedleSearch {
  /** How many needles were given (duplicates included). */
  readonly size: number;
  /** Distinct code units among the needles. */
  readonly classes: number;
  /** States of the automaton, the root included. */
  readonly states: number;
  private readonly classOf: Int32Array;
  private readonly label: Int32Array;
  private readonly firstChild: Int32Array;
  private readonly childCount: Int32Array;
  private readonly denseRow: Int32Array;
  private readonly dense: Int32Array;
  private readonly fail: Int32Array;
  /** The nearest state on the failure chain that ends a needle (0: none; the root ends none). */
  private readonly dict: Int32Array;
  /** The distinct needle a state ends (-1: none). */
  private readonly output: Int32Array;
  /** The state itself if it ends a needle, else `dict`: where the needles ending here start being listed. */
  private readonly ends: Int32Array;
  private readonly depth: Int32Array;
  /** For each distinct needle, the first of the given positions holding it; `sameNext` chains the rest. */
  private readonly firstGiven: Int32Array;
  private readonly sameNext: Int32Array;
  /** `seen[u] === stamp`: distinct needle u was already found in the current text. */
  private readonly seen: Uint32Array;
  private stamp = 0;

  /** `denseCells`: how many 4-byte cells the dense rows may take (tests set 0 to try the binary search). */
  constructor(needles: readonly string[], { denseCells = DENSE_BUDGET }: { denseCells?: number } = {}) {
    this.size = needles.length;
    const uniqueIndex = new Map<string, number>();
    const last = new Map<string, number>();
    this.sameNext = new Int32Array(needles.length).fill(-1);
    needles.forEach((n, i) => {
      if (n.length === 0) throw new Error('NeedleSearch: an empty needle matches everywhere');
      const prev = last.get(n);
      if (prev === undefined) uniqueIndex.set(n, i);
      else this.sameNext[prev] = i;
      last.set(n, i);
    });
    // Sorted by code units (the default order), a needle comes right before those it is a prefix of,
    // and the needles below a trie state are one run of the list.
    const unique = [...uniqueIndex.keys()].sort();
    this.firstGiven = Int32Array.from(unique, (n) => uniqueIndex.get(n)!);
    this.seen = new Uint32Array(unique.length);

    const used = new Uint8Array(65_536);
    let cap = 1;
    for (const n of unique) {
      cap += n.length;
      for (let j = 0; j < n.length; j++) used[n.charCodeAt(j)] = 1;
    }
    this.classOf = new Int32Array(65_536);
    let k = 0;
    for (let c = 0; c < 65_536; c++) if (used[c]) this.classOf[c] = ++k;
    this.classes = k;

    // The trie, breadth-first: state s stands for a prefix of length depth[s] shared by unique[lo..hi).
    const label = new Int32Array(cap);
    const firstChild = new Int32Array(cap);
    const childCount = new Int32Array(cap);
    const output = new Int32Array(cap).fill(-1);
    const depth = new Int32Array(cap);
    const lo = new Int32Array(cap);
    const hi = new Int32Array(cap);
    hi[0] = unique.length;
    let count = 1;
    for (let s = 0; s < count; s++) {
      const d = depth[s]!;
      let i = lo[s]!;
      const end = hi[s]!;
      if (i < end && unique[i]!.length === d) output[s] = i++;
      firstChild[s] = count;
      while (i < end) {
        const c = unique[i]!.charCodeAt(d);
        let j = i + 1;
        while (j < end && unique[j]!.charCodeAt(d) === c) j++;
        label[count] = this.classOf[c]!;
        depth[count] = d + 1;
        lo[count] = i;
        hi[count] = j;
        count++;
        i = j;
      }
      childCount[s] = count - firstChild[s]!;
    }
    this.states = count;
    this.label = label.subarray(0, count);
    this.firstChild = firstChild.subarray(0, count);
    this.childCount = childCount.subarray(0, count);
    this.output = output.subarray(0, count);
    this.depth = depth.subarray(0, count);

    // Dense rows for the wide states (the shallow ones, where most text lands), within the budget.
    this.denseRow = new Int32Array(count).fill(-1);
    let rows = 0;
    for (let s = 0; s < count; s++) {
      const wide = childCount[s]! >= DENSE_CHILDREN && (rows + 1) * (k + 1) <= denseCells;
      if (s === 0 || wide) this.denseRow[s] = rows++;
    }
    this.dense = new Int32Array(rows * (k + 1)).fill(-1);
    for (let s = 0; s < count; s++) {
      const row = this.denseRow[s]!;
      if (row < 0) continue;
      this.denseRow[s] = row * (k + 1);
      for (let v = firstChild[s]!; v < firstChild[s]! + childCount[s]!; v++)
        this.dense[row * (k + 1) + label[v]!] = v;
    }

    // Failure links, breadth-first: a state's link is the longest proper suffix of its prefix that is
    // itself a state; `dict` skips along them to the states that end a needle.
    this.fail = new Int32Array(count);
    this.dict = new Int32Array(count);
    for (let s = 0; s < count; s++) {
      for (let v = firstChild[s]!; v < firstChild[s]! + childCount[s]!; v++) {
        let target = 0;
        if (s !== 0) {
          let f = this.fail[s]!;
          let t = this.step(f, label[v]!);
          while (t < 0 && f !== 0) {
            f = this.fail[f]!;
            t = this.step(f, label[v]!);
          }
          if (t > 0) target = t;
        }
        this.fail[v] = target;
        this.dict[v] = this.output[target]! >= 0 ? target : this.dict[target]!;
      }
    }
    this.ends = Int32Array.from(this.dict, (d, s) => (this.output[s]! >= 0 ? s : d));
    // Dense rows become complete transitions (a missing child: where the failure link leads), so the
    // search never falls back through a wide state. Breadth-first, a link's own row is complete already.
    for (let s = 0; s < count; s++) {
      const row = this.denseRow[s]!;
      if (row < 0) continue;
      for (let c = 1; c <= k; c++) {
        if (this.dense[row + c]! >= 0) continue;
        let t = 0;
        if (s !== 0) {
          let f = this.fail[s]!;
          t = this.step(f, c);
          while (t < 0 && f !== 0) {
            f = this.fail[f]!;
            t = this.step(f, c);
          }
        }
        this.dense[row + c] = Math.max(t, 0);
      }
    }
  }

  /** The child of state s labelled k, or -1 (a dense row: the full transition, never -1). */
  private step(s: number, k: number): number {
    const row = this.denseRow[s]!;
    if (row >= 0) return this.dense[row + k]!;
    const first = this.firstChild[s]!;
    const n = this.childCount[s]!;
    if (n < DENSE_CHILDREN) {
      for (let v = first; v < first + n; v++) {
        const l = this.label[v]!;
        if (l === k) return v;
        if (l > k) return -1;
      }
      return -1;
    }
    let a = first;
    let b = first + n - 1;
    while (a <= b) {
      const m = (a + b) >>> 1;
      const l = this.label[m]!;
      if (l === k) return m;
      if (l < k) a = m + 1;
      else b = m - 1;
    }
    return -1;
  }

  /**
   * Every needle that occurs in `text`, once each (a needle given twice: once per position), with the
   * index of its first occurrence; in no particular order. Empty when none occurs.
   */
  firstOccurrences(text: string): Occurrence[] {
    const found: Occurrence[] = [];
    if (this.states === 1) return found;
    if (this.stamp === 0xffff_ffff) {
      this.seen.fill(0);
      this.stamp = 0;
    }
    const stamp = ++this.stamp;
    const { classOf, fail, dict, ends, output, depth, seen } = this;
    let s = 0;
    for (let i = 0; i < text.length; i++) {
      const k = classOf[text.charCodeAt(i)]!;
      if (k === 0) {
        s = 0;
        continue;
      }
      // The root's row is dense (complete): falling back along failure links ends there at the latest.
      let t = this.step(s, k);
      while (t < 0) {
        s = fail[s]!;
        t = this.step(s, k);
      }
      s = t;
      for (let o = ends[s]!; o !== 0; o = dict[o]!) {
        const u = output[o]!;
        if (seen[u] === stamp) continue;
        seen[u] = stamp;
        const index = i + 1 - depth[o]!;
        for (let g = this.firstGiven[u]!; g >= 0; g = this.sameNext[g]!) found.push({ needle: g, index });
      }
    }
    return found;
  }
}

/** A known secret found in a text: the first of its forms that occurs, at its first index. */
export interface KnownHit {
  label: string;
  index: number;
  length: number;
}

/**
 * The known secrets of a run as needles (every form `variants` gives), searched for all at once. Each
 * secret found in a text is answered once, with the first of its forms (in `variants` order) that
 * occurs anywhere in the text, at that form's first index; answers come in the order of the secrets.
 */
export class KnownSecrets {
  readonly labels: string[] = [];
  /** Every form of every secret, secret by secret, each secret's forms in `variants` order. */
  readonly needles: string[] = [];
  /** The secret (index into `labels`) of each needle. */
  private readonly secretOf: number[] = [];
  private readonly search: NeedleSearch;

  constructor(secrets: readonly { label: string; value: string }[]) {
    for (const s of secrets) {
      for (const n of variants(s.value)) {
        this.needles.push(n);
        this.secretOf.push(this.labels.length);
      }
      this.labels.push(s.label);
    }
    this.search = new NeedleSearch(this.needles);
  }

  find(text: string): KnownHit[] {
    const found = this.search.firstOccurrences(text);
    if (found.length === 0) return [];
    // Needles are numbered secret by secret, forms in order: the lowest needle of a secret is its first form.
    const first = new Map<number, Occurrence>();
    for (const o of found) {
      const secret = this.secretOf[o.needle]!;
      const best = first.get(secret);
      if (best === undefined || o.needle < best.needle) first.set(secret, o);
    }
    return [...first]
      .sort((a, b) => a[0] - b[0])
      .map(([secret, o]) => ({
        label: this.labels[secret]!,
        index: o.index,
        length: this.needles[o.needle]!.length,
      }));
  }

  /** Masks every known secret in an excerpt, so a report of findings does not spread them further. */
  hide(excerpt: string): string {
    // Nothing occurs: every split/join below would leave the excerpt as it is.
    if (this.search.firstOccurrences(excerpt).length === 0) return excerpt;
    let out = excerpt;
    for (const n of this.needles) out = out.split(n).join(mask(n));
    return out;
  }
}

class Matcher {
  readonly known: KnownSecrets;
  readonly cvvValues: Map<string, string>;
  private readonly detectors: Required<NonNullable<ScanOptions['detectors']>>;

  constructor(options: ScanOptions, stats: ScanStats) {
    this.detectors = { luhn: true, cvv: true, pem: true, ...options.detectors };
    this.cvvValues = new Map();
    const searched: KnownSecret[] = [];
    for (const s of options.secrets) {
      if (s.kind === 'cvv') {
        this.cvvValues.set(s.value, s.label);
        continue;
      }
      if (s.value.length < MIN_SECRET_LENGTH) {
        stats.skippedSecrets.push(s.label);
        continue;
      }
      searched.push(s);
    }
    this.known = new KnownSecrets(searched);
    stats.secretPatterns = this.known.needles.length;
  }

  /** Every finding in a text, with its place and location. */
  scan(text: string, place: Place, location: string, out: Hit[]): void {
    const hit = (detector: Detector, label: string, index: number, length: number) => {
      const before = text.slice(Math.max(0, index - 40), index);
      const after = text.slice(index + length, index + length + 40);
      out.push({
        detector,
        label,
        place,
        location,
        excerpt: this.known.hide(`${before}${mask(text.slice(index, index + length))}${after}`),
      });
    };
    for (const k of this.known.find(text)) hit('known', k.label, k.index, k.length);
    if ((this.detectors.cvv || this.cvvValues.size > 0) && CVV_HINT.test(text)) {
      for (const m of text.matchAll(CVV_FIELD)) {
        const code = m[2]!;
        const known = this.cvvValues.get(code);
        if (known !== undefined) hit('known', known, m.index, m[0].length);
        else if (this.detectors.cvv)
          hit('cvv', `${m[1]} field with ${code.length} digits`, m.index, m[0].length);
      }
    }
    if (this.detectors.pem) {
      for (const m of text.matchAll(PEM)) hit('pem', m[0], m.index, m[0].length);
    }
    if (this.detectors.luhn) {
      for (const m of text.matchAll(DIGIT_RUN)) {
        const digits = m[0].replace(/[ -]/g, '');
        if (digits.length < 13 || digits.length > 19) continue;
        if (!/^[2-6]/.test(digits) || !luhnValid(digits)) continue;
        hit('luhn', `Luhn-valid ${digits.length}-digit number ${mask(digits)}`, m.index, m[0].length);
      }
    }
  }

  /** A value of a cvv-named column (or workbook column): 3-4 digits is a finding. */
  scanCvvValue(name: string, value: string, place: Place, location: string, out: Hit[]): void {
    if (!CVV_COLUMN.test(name) || !/^\s*\d{3,4}\s*$/.test(value)) return;
    const known = this.cvvValues.get(value.trim());
    if (known !== undefined || this.detectors.cvv) {
      out.push({
        detector: known !== undefined ? 'known' : 'cvv',
        label: known ?? `${name} column with ${value.trim().length} digits`,
        place,
        location,
        excerpt: `${name}: ***`,
      });
    }
  }
}

// ---- logs

function scanLog(name: string, text: string, m: Matcher, stats: ScanStats, out: Hit[]): void {
  stats.logs++;
  stats.logBytes += Buffer.byteLength(text);
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.length === 0) continue;
    stats.logLines++;
    m.scan(line, 'log', `log ${name}:${i + 1}`, out);
  }
}

// ---- database

async function scanDatabase(
  db: NonNullable<ScanOptions['database']>,
  m: Matcher,
  stats: ScanStats,
  out: Hit[],
): Promise<void> {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  try {
    const { rows: columns } = await client.query<{
      table_schema: string;
      table_name: string;
      column_name: string;
      data_type: string;
    }>(
      `SELECT c.table_schema, c.table_name, c.column_name, c.data_type
         FROM information_schema.columns c
         JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE t.table_type = 'BASE TABLE'
          AND c.table_schema NOT IN ('pg_catalog', 'information_schema')
          AND c.table_schema NOT LIKE 'pg_toast%'
        ORDER BY c.table_schema, c.table_name, c.ordinal_position`,
    );
    const tables = new Map<string, { schema: string; table: string; columns: typeof columns }>();
    for (const c of columns) {
      if (db.schemas && !db.schemas.includes(c.table_schema)) continue;
      const key = `${c.table_schema}.${c.table_name}`;
      const entry = tables.get(key) ?? { schema: c.table_schema, table: c.table_name, columns: [] };
      entry.columns.push(c);
      tables.set(key, entry);
    }
    const ident = (s: string) => `"${s.replace(/"/g, '""')}"`;
    for (const [name, t] of tables) {
      stats.tables++;
      const exprs = t.columns.map((c, i) =>
        c.data_type === 'bytea'
          ? `encode(${ident(c.column_name)}, 'escape') AS c${i}`
          : `${ident(c.column_name)}::text AS c${i}`,
      );
      // A cursor reads the table once, 2,000 rows at a time; paging by `ctid > last ORDER BY ctid LIMIT`
      // re-read and sorted the rest of the table for every page (quadratic: 300,000 rows took 21 s).
      await client.query('BEGIN READ ONLY');
      await client.query(
        `DECLARE scan NO SCROLL CURSOR FOR
           SELECT ctid::text AS _ctid, ${exprs.join(', ')} FROM ${ident(t.schema)}.${ident(t.table)}`,
      );
      for (;;) {
        const { rows } = await client.query<Record<string, string | null>>('FETCH FORWARD 2000 FROM scan');
        for (const row of rows) {
          stats.rows++;
          t.columns.forEach((c, i) => {
            stats.values++;
            const v = row[`c${i}`];
            if (v === null || v === undefined) return;
            stats.databaseBytes += Buffer.byteLength(v);
            const location = `${name}.${c.column_name} ctid ${row._ctid}`;
            m.scan(v, 'database', location, out);
            m.scanCvvValue(c.column_name, v, 'database', location, out);
          });
        }
        if (rows.length < 2000) break;
      }
      await client.query('COMMIT');
    }
  } finally {
    await client.end();
  }
}

// ---- topics

function jsonText(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v === 'bigint') return v.toString();
    if (v && typeof v === 'object' && (v as { type?: string }).type === 'Buffer') {
      return Buffer.from((v as { data: number[] }).data).toString('latin1');
    }
    return v;
  });
}

async function scanTopics(
  k: NonNullable<ScanOptions['kafka']>,
  m: Matcher,
  stats: ScanStats,
  out: Hit[],
): Promise<void> {
  const kafka = new Kafka({
    brokers: [...k.brokers],
    clientId: 'secrets-scan',
    logLevel: logLevel.NOTHING,
    retry: { retries: 3 },
  });
  const registry = k.registryUrl ? new SchemaRegistry({ host: k.registryUrl }) : null;
  const admin = kafka.admin();
  await admin.connect();
  const consumer = kafka.consumer({
    groupId: `secrets-scan-${randomBytes(6).toString('hex')}`,
    maxWaitTimeInMs: 100,
  });
  try {
    const topics = (k.topics ?? (await admin.listTopics())).filter((t) => !t.startsWith('__'));
    const remaining = new Map<string, bigint>();
    for (const topic of topics) {
      stats.topics++;
      for (const p of await admin.fetchTopicOffsets(topic)) {
        if (BigInt(p.high) > BigInt(p.low)) remaining.set(`${topic}/${p.partition}`, BigInt(p.high));
      }
    }
    if (remaining.size === 0) return;
    let done: () => void = () => {};
    const finished = new Promise<void>((r) => {
      done = r;
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [...topics], fromBeginning: true });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const msg of batch.messages) {
          const at = `${batch.topic}[${batch.partition}]@${msg.offset}`;
          stats.messages++;
          const key = msg.key ?? Buffer.alloc(0);
          const value = msg.value ?? Buffer.alloc(0);
          stats.messageBytes += key.length + value.length;
          // Bytes as latin1 and as UTF-8; an ASCII payload reads the same both ways and is scanned once.
          const keyLatin1 = key.toString('latin1');
          m.scan(keyLatin1, 'topic', `${at} key`, out);
          const keyUtf8 = key.toString('utf8');
          if (keyUtf8 !== keyLatin1) m.scan(keyUtf8, 'topic', `${at} key`, out);
          const valueLatin1 = value.toString('latin1');
          m.scan(valueLatin1, 'topic', `${at} value bytes`, out);
          const valueUtf8 = value.toString('utf8');
          if (valueUtf8 !== valueLatin1) m.scan(valueUtf8, 'topic', `${at} value bytes`, out);
          for (const [h, hv] of Object.entries(msg.headers ?? {})) {
            const text = Array.isArray(hv) ? hv.map((x) => String(x)).join(' ') : String(hv ?? '');
            m.scan(`${h}: ${text}`, 'topic', `${at} header ${h}`, out);
          }
          if (registry && value.length > 5 && value[0] === 0) {
            try {
              const decoded: unknown = await registry.decode(value);
              stats.decoded++;
              m.scan(jsonText(decoded), 'topic', `${at} value avro`, out);
            } catch {
              // Not Avro after all: the raw bytes were scanned.
            }
          }
          const key2 = `${batch.topic}/${batch.partition}`;
          const high = remaining.get(key2);
          if (high !== undefined && BigInt(msg.offset) + 1n >= high) {
            remaining.delete(key2);
            if (remaining.size === 0) done();
          }
        }
      },
    });
    const timeoutMs = k.timeoutMs ?? 60_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      finished,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new Error(
                `secrets scan: topics not read to their end in ${timeoutMs} ms: ${[...remaining.keys()]}`,
              ),
            ),
          timeoutMs,
        );
      }),
    ]).finally(() => clearTimeout(timer));
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
  }
}

// ---- files

async function walk(path: string, into: string[]): Promise<void> {
  const info = await stat(path);
  if (info.isDirectory()) {
    for (const name of (await readdir(path)).sort()) await walk(join(path, name), into);
  } else if (info.isFile()) into.push(path);
}

async function scanFile(path: string, m: Matcher, stats: ScanStats, out: Hit[]): Promise<void> {
  const bytes = await readFile(path);
  stats.files++;
  stats.fileBytes += bytes.length;
  if (!path.toLowerCase().endsWith('.xlsx')) {
    m.scan(bytes.toString('utf8'), 'file', path, out);
    return;
  }
  stats.workbooks++;
  const zip = await JSZip.loadAsync(bytes);
  for (const name of Object.keys(zip.files).sort()) {
    const entry = zip.files[name]!;
    if (entry.dir) continue;
    const text = await entry.async('string');
    stats.xmlParts++;
    m.scan(xmlDecode(text), 'file', `${path}!${name}`, out);
  }
  const workbook = new ExcelJS.Workbook();
  await workbook.xlsx.load(bytes as unknown as ArrayBuffer);
  workbook.eachSheet((sheet) => {
    const headers = new Map<number, string>();
    sheet.eachRow((row, r) => {
      row.eachCell((cell, c) => {
        const text = cell.text ?? '';
        if (text === '') return;
        stats.cells++;
        const location = `${path}!${sheet.name}!${cell.address}`;
        m.scan(text, 'file', location, out);
        if (r === 1) headers.set(c, text);
        else {
          const header = headers.get(c);
          if (header) m.scanCvvValue(header.replace(/\W+/g, '_'), text, 'file', location, out);
        }
      });
    });
  });
}

/** Scans everything the options name; resolves with every finding (empty: clean). */
export async function scanForSecrets(options: ScanOptions): Promise<Hit[]> {
  const stats = options.stats ?? emptyStats();
  const m = new Matcher(options, stats);
  const out: Hit[] = [];
  const timed = async (part: keyof ScanStats['ms'], run: () => Promise<void>) => {
    const started = performance.now();
    await run();
    stats.ms[part] += Math.round(performance.now() - started);
  };
  await timed('logs', async () => {
    for (const log of options.logs ?? []) scanLog(log.name, log.text, m, stats, out);
    for (const file of options.logFiles ?? []) scanLog(file, await readFile(file, 'utf8'), m, stats, out);
  });
  if (options.database) await timed('database', () => scanDatabase(options.database!, m, stats, out));
  if (options.kafka) await timed('topics', () => scanTopics(options.kafka!, m, stats, out));
  await timed('files', async () => {
    const files: string[] = [];
    for (const f of options.files ?? []) await walk(f, files);
    for (const f of files) await scanFile(f, m, stats, out);
  });
  // One finding per location and label (the same message scanned as bytes and as Avro counts once per form).
  const seen = new Set<string>();
  const unique = out.filter((h) => {
    const key = `${h.detector}|${h.label}|${h.location}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return options.ignore ? unique.filter((h) => !options.ignore!(h)) : unique;
}
