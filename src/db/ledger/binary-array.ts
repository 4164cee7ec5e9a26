/**
 * Column arrays in PostgreSQL's binary array format, sent as binary parameters: `pg` sends a parameter
 * whose value is a Buffer with format code 1 (pg-protocol's `bind`), and the server reads it with
 * `array_recv` and each element type's `*_recv` instead of `array_in` and the type's text input (the
 * text input of numeric and timestamptz, and the array literal's own parsing, were most of the cost of
 * reading a batch's rows). The array's element type must be the type the statement gives the parameter
 * (`$1::numeric[]`): `array_recv` refuses any other.
 *
 * Format (`array_recv`): int32 number of dimensions (0 for an empty array), int32 has-NULLs flag, uint32
 * element type OID, per dimension int32 length and int32 lower bound, then per element an int32 byte
 * length (-1 for NULL) and the element's binary form (`*_send`). All integers big-endian.
 *
 * Elements are written into one scratch buffer that grows as needed (encoding is synchronous, so one
 * buffer serves every statement), and each array is copied out of it.
 */
import type { Minor } from '../../domain/money.ts';

/** An element type and what the ledger passes for one of its values. */
export interface ElementValues {
  text: string;
  /** JSON text. */
  jsonb: string;
  /** Minor units of an amount with two decimals, written with scale 2 (as `formatAmount` writes it). */
  numeric: Minor;
  /** An instant (the milliseconds a Date carries). */
  timestamptz: Date;
  boolean: boolean;
  smallint: number;
  integer: number;
}

export type ElementType = keyof ElementValues;

/** The element types' OIDs (pg_type), checked by `array_recv` against the parameter's type. */
const OIDS: Readonly<Record<ElementType, number>> = {
  boolean: 16,
  smallint: 21,
  integer: 23,
  text: 25,
  numeric: 1700,
  timestamptz: 1184,
  jsonb: 3802,
};

const SCRATCH = 1 << 16;
/** Kept between statements up to this size; a bigger one is dropped after use. */
const SCRATCH_KEPT = 1 << 22;
let buf = Buffer.allocUnsafe(SCRATCH);
let pos = 0;

function room(n: number): void {
  if (pos + n <= buf.length) return;
  let size = buf.length * 2;
  while (size < pos + n) size *= 2;
  const next = Buffer.allocUnsafe(size);
  buf.copy(next, 0, 0, pos);
  buf = next;
}

/** Writes an int32 (or a uint32: the same bytes) at `at`; the caller made room. */
function int32At(at: number, v: number): void {
  buf[at] = v >>> 24;
  buf[at + 1] = v >>> 16;
  buf[at + 2] = v >>> 8;
  buf[at + 3] = v;
}

function int32(v: number): void {
  int32At(pos, v);
  pos += 4;
}

function int16(v: number): void {
  buf[pos] = v >>> 8;
  buf[pos + 1] = v;
  pos += 2;
}

/** The string's UTF-8 bytes after their int32 length. */
function text(s: string): void {
  room(4 + 3 * s.length);
  const bytes = buf.write(s, pos + 4, 'utf8');
  int32(bytes);
  pos += bytes;
}

/** jsonb_send's form: the version byte 1, then the JSON text. */
function jsonb(s: string): void {
  room(5 + 3 * s.length);
  const at = pos;
  buf[at + 4] = 1;
  const bytes = buf.write(s, at + 5, 'utf8');
  int32At(at, bytes + 1);
  pos = at + 5 + bytes;
}

/** Base-10000 digits of the amount times 100, least significant first (scratch for `numeric`). */
const digits = new Int32Array(16);
/** The largest minor amount taken as a number (exact; times 100 stays below 2^53). */
const SAFE_MINOR = 90_071_992_547_409n;

/**
 * numeric_send's form of minor units at scale 2: int16 number of base-10000 digits, int16 weight of the
 * first, uint16 sign (0x4000 negative), int16 display scale 2, then the digits, leading and trailing
 * zero digits left out. The minor units times 100 are the value in units of 10^-4, so their last
 * base-10000 digit has weight -1.
 */
function numeric(v: Minor): void {
  let k = 0;
  let negative: boolean;
  if (v <= SAFE_MINOR && v >= -SAFE_MINOR) {
    const x = Number(v);
    negative = x < 0;
    let d = (negative ? -x : x) * 100;
    while (d > 0) {
      const digit = d % 10_000;
      digits[k++] = digit;
      d = (d - digit) / 10_000;
    }
  } else {
    negative = v < 0n;
    for (let d = (negative ? -v : v) * 100n; d > 0n; d /= 10_000n) {
      if (k === digits.length) throw new RangeError(`amount too large for a numeric parameter: ${v}`);
      digits[k++] = Number(d % 10_000n);
    }
  }
  let low = 0;
  while (low < k && digits[low] === 0) low++;
  const n = k - low;
  room(12 + 2 * n);
  int32(8 + 2 * n);
  int16(n);
  int16(n === 0 ? 0 : k - 2);
  int16(negative && n > 0 ? 0x4000 : 0);
  int16(2);
  for (let i = k - 1; i >= low; i--) int16(digits[i]!);
}

/** 2000-01-01T00:00:00Z, PostgreSQL's epoch, in Unix milliseconds. */
const PG_EPOCH_MS = 946_684_800_000;
const TWO_32 = 4_294_967_296;

/** timestamptz_send's form: int64 microseconds since 2000-01-01 UTC. */
function timestamptz(d: Date): void {
  const ms = d.getTime();
  if (Number.isNaN(ms)) throw new RangeError('Invalid time value');
  const us = (ms - PG_EPOCH_MS) * 1000;
  room(12);
  int32(8);
  if (Number.isSafeInteger(us)) {
    const hi = Math.floor(us / TWO_32);
    int32(hi);
    int32(us - hi * TWO_32);
  } else {
    buf.writeBigInt64BE(BigInt(ms - PG_EPOCH_MS) * 1000n, pos);
    pos += 8;
  }
}

function integer(v: number, bytes: 2 | 4): void {
  const max = bytes === 2 ? 0x7fff : 0x7fffffff;
  if (!Number.isInteger(v) || v > max || v < -max - 1)
    throw new RangeError(`not a ${bytes * 8}-bit integer: ${v}`);
  room(4 + bytes);
  int32(bytes);
  if (bytes === 2) int16(v);
  else int32(v);
}

const WRITERS: { readonly [K in ElementType]: (v: ElementValues[K]) => void } = {
  text,
  jsonb,
  numeric,
  timestamptz,
  boolean: (v) => {
    room(5);
    int32(1);
    buf[pos++] = v ? 1 : 0;
  },
  smallint: (v) => integer(v, 2),
  integer: (v) => integer(v, 4),
};

/** Strings at least this long are written by one native call; shorter ones character by character. */
const NATIVE_WRITE = 64;

/**
 * Writes the elements of a column after the array header: NULL as length -1, a value by `write`, which
 * returns false to give up on the column (the caller then rewinds). With `trimNulls`, the NULLs after the
 * last value are left out (`unnest` of several arrays pads the shorter ones with NULLs). Returns the
 * elements kept and whether a NULL is among them, or null when `write` gave up.
 */
function writeElements<T, V>(
  rows: readonly T[],
  value: (row: T) => V | null | undefined,
  write: (v: V) => boolean,
  trimNulls: boolean,
): { count: number; nulls: boolean } | null {
  let count = 0;
  let end = pos;
  let nulls = false;
  let nullsKept = false;
  for (let i = 0; i < rows.length; i++) {
    const v = value(rows[i]!);
    if (v === null || v === undefined) {
      room(4);
      int32(-1);
      nulls = true;
      continue;
    }
    if (!write(v)) return null;
    count = i + 1;
    end = pos;
    nullsKept = nulls;
  }
  if (!trimNulls) return { count: rows.length, nulls };
  pos = end;
  return { count, nulls: nullsKept };
}

/**
 * One element of a text or jsonb column (`version`: jsonb's version byte first) written straight into
 * the scratch buffer if it is ASCII (its characters are its UTF-8 bytes): its length, then the value, a
 * short one character by character (a native write per element cost about three times as much on ids),
 * a long one with one native write whose UTF-8 length tells whether it was ASCII. Nothing is allocated
 * (building the column as one latin1 string first was the largest allocation of a batch). Returns false,
 * having written nothing the caller keeps, when the value is not ASCII: the caller rewinds and writes the
 * column element by element.
 */
function asciiElement(v: string, version: boolean): boolean {
  const head = version ? 5 : 4;
  const n = v.length;
  room(n < NATIVE_WRITE ? head + n : head + 3 * n);
  const at = pos + head;
  if (n < NATIVE_WRITE) {
    for (let j = 0; j < n; j++) {
      const c = v.charCodeAt(j);
      if (c > 0x7f) return false;
      buf[at + j] = c;
    }
  } else if (buf.write(v, at, 'utf8') !== n) return false;
  if (version) {
    int32(n + 1);
    buf[pos++] = 1;
  } else {
    int32(n);
  }
  pos += n;
  return true;
}

const asciiText = (v: string) => asciiElement(v, false);
const asciiJsonb = (v: string) => asciiElement(v, true);

/**
 * Appends one column of the rows as a one-dimensional array of `type` to the scratch buffer (an empty
 * array when there is no element). With `trimNulls`, the NULL elements after the last value are left
 * out (`unnest` of several arrays pads the shorter ones with NULLs).
 */
function appendColumn<T, K extends ElementType>(
  rows: readonly T[],
  type: K,
  value: (row: T) => ElementValues[K] | null | undefined,
  trimNulls: boolean,
): void {
  const start = pos;
  room(20);
  int32(1);
  const flagsAt = pos;
  int32(0);
  int32(OIDS[type]);
  const lengthAt = pos;
  int32(0);
  int32(1);
  let written: { count: number; nulls: boolean } | null = null;
  if (type === 'text' || type === 'jsonb') {
    const from = pos;
    written = writeElements(
      rows,
      value as (row: T) => string | null,
      type === 'jsonb' ? asciiJsonb : asciiText,
      trimNulls,
    );
    if (written === null) pos = from;
  }
  if (written === null) {
    const write = WRITERS[type] as (v: ElementValues[K]) => void;
    written = writeElements(
      rows,
      value,
      (v) => {
        write(v);
        return true;
      },
      trimNulls,
    )!;
  }
  finish(start, flagsAt, lengthAt, written.count, written.nulls, OIDS[type]);
}

/** Fills in the header of the array started at `start`, or makes it the empty array if it has no element. */
function finish(
  start: number,
  flagsAt: number,
  lengthAt: number,
  count: number,
  nulls: boolean,
  oid: number,
) {
  if (count === 0) {
    // No dimension: the empty array.
    pos = start;
    int32(0);
    int32(0);
    int32(oid);
    return;
  }
  int32At(flagsAt, nulls ? 1 : 0);
  int32At(lengthAt, count);
}

/** One column of a row source: its element type and its value in a row (null or undefined: NULL). */
export type BinaryColumn<T> = {
  readonly [K in ElementType]: readonly [type: K, value: (row: T) => ElementValues[K] | null | undefined];
}[ElementType];

/**
 * The columns of the rows as binary arrays, one Buffer each (views of one allocation), in the order of
 * `columns`. Every column but the first is sent without its trailing NULLs (the first keeps the row count).
 */
export function binaryColumns<T>(rows: readonly T[], columns: readonly BinaryColumn<T>[]): Buffer[] {
  pos = 0;
  const ends = new Array<number>(columns.length);
  try {
    for (let i = 0; i < columns.length; i++) {
      const [type, value] = columns[i]!;
      appendColumn(rows, type, value as (row: T) => never, i > 0);
      ends[i] = pos;
    }
    const out = Buffer.allocUnsafe(pos);
    buf.copy(out, 0, 0, pos);
    const arrays = new Array<Buffer>(columns.length);
    let from = 0;
    for (let i = 0; i < columns.length; i++) {
      arrays[i] = out.subarray(from, ends[i]);
      from = ends[i]!;
    }
    return arrays;
  } finally {
    pos = 0;
    if (buf.length > SCRATCH_KEPT) buf = Buffer.allocUnsafe(SCRATCH);
  }
}

/** The values as one binary array of `type` (NULL for null), every element kept. */
export function binaryArray<K extends ElementType>(
  type: K,
  values: readonly (ElementValues[K] | null)[],
): Buffer {
  return binaryColumns(values, [[type, (v) => v] as BinaryColumn<ElementValues[K] | null>])[0]!;
}
