/**
 * A struct-driven codec for the non-flexible Kafka wire format. Each message is declared as data (a
 * list of fields, each valid for a range of versions) and one reader and one writer walk that
 * declaration, so adding a version is a line in `messages.ts`, not new encoding code.
 */

/** A primitive wire type. `int64` values decode to bigint and encode from bigint or number. */
export type Primitive =
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'uint32'
  | 'bool'
  | 'string'
  | 'nstring'
  | 'bytes'
  | 'nbytes';

/** An array of structs (`fields`) or of a primitive (`of`); `nullable` arrays encode null as length -1. */
export interface ArrayType {
  readonly array: Fields | Primitive;
  readonly nullable?: boolean;
}

export type FieldType = Primitive | ArrayType;

/** `[name, type, minVersion, maxVersion]`: the field exists in versions min..max (inclusive). */
export type Field = readonly [name: string, type: FieldType, min?: number, max?: number];
export type Fields = readonly Field[];

// biome-ignore lint/suspicious/noExplicitAny: decoded structs are shaped by their declaration, not a static type
export type Struct = Record<string, any>;

export class Reader {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  int8(): number {
    const v = this.buf.readInt8(this.pos);
    this.pos += 1;
    return v;
  }
  int16(): number {
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  int32(): number {
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  uint32(): number {
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  int64(): bigint {
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    return v;
  }
  nstring(): string | null {
    const len = this.int16();
    if (len < 0) return null;
    const s = this.buf.toString('utf8', this.pos, this.pos + len);
    this.pos += len;
    return s;
  }
  nbytes(): Buffer | null {
    const len = this.int32();
    if (len < 0) return null;
    if (this.pos + len > this.buf.length) throw new RangeError('bytes field past the end of the frame');
    const b = this.buf.subarray(this.pos, this.pos + len);
    this.pos += len;
    return b;
  }
}

/** Byte fields at least this large are referenced, not copied, in the encoded output. */
const ZERO_COPY_BYTES = 16 * 1024;

export class Writer {
  private buf: Buffer;
  pos = 0;
  /** Finished pieces before `buf`: filled buffers and large byte fields passed by reference. */
  private readonly parts: Buffer[] = [];
  private partsLength = 0;

  constructor(size = 256) {
    this.buf = Buffer.allocUnsafe(size);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    // At least 256: after a zero-copy byte field `buf` is what was left of the old one, possibly nothing,
    // and doubling nothing looped forever (a fetch response whose large record batch ended exactly at the
    // buffer's end froze the process that ran the broker: seen in the secrets audit, 100% CPU in here).
    let size = Math.max(this.buf.length * 2, 256);
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  int8(v: number): this {
    this.ensure(1);
    this.buf.writeInt8(v, this.pos);
    this.pos += 1;
    return this;
  }
  int16(v: number): this {
    this.ensure(2);
    this.buf.writeInt16BE(v, this.pos);
    this.pos += 2;
    return this;
  }
  int32(v: number): this {
    this.ensure(4);
    this.buf.writeInt32BE(v, this.pos);
    this.pos += 4;
    return this;
  }
  uint32(v: number): this {
    this.ensure(4);
    this.buf.writeUInt32BE(v >>> 0, this.pos);
    this.pos += 4;
    return this;
  }
  int64(v: bigint | number): this {
    this.ensure(8);
    this.buf.writeBigInt64BE(BigInt(v), this.pos);
    this.pos += 8;
    return this;
  }
  nstring(v: string | null | undefined): this {
    if (v === null || v === undefined) return this.int16(-1);
    const len = Buffer.byteLength(v);
    this.int16(len);
    this.ensure(len);
    this.buf.write(v, this.pos);
    this.pos += len;
    return this;
  }
  nbytes(v: Buffer | null | undefined): this {
    if (v === null || v === undefined) return this.int32(-1);
    this.int32(v.length);
    if (v.length >= ZERO_COPY_BYTES) {
      this.parts.push(this.buf.subarray(0, this.pos), v);
      this.partsLength += this.pos + v.length;
      this.buf = this.buf.subarray(this.pos);
      this.pos = 0;
      return this;
    }
    this.ensure(v.length);
    v.copy(this.buf, this.pos);
    this.pos += v.length;
    return this;
  }
  /** Total bytes written. */
  get length(): number {
    return this.partsLength + this.pos;
  }
  /** The output as a list of buffers (views, not copies), for a vectored socket write. */
  chunks(): Buffer[] {
    return [...this.parts, this.buf.subarray(0, this.pos)].filter((b) => b.length > 0);
  }
  /** The output as one buffer (copies only when large byte fields were referenced). */
  done(): Buffer {
    if (this.parts.length === 0) return this.buf.subarray(0, this.pos);
    return Buffer.concat(this.chunks(), this.length);
  }
}

function inVersion(field: Field, version: number): boolean {
  const min = field[2] ?? 0;
  const max = field[3] ?? Number.MAX_SAFE_INTEGER;
  return version >= min && version <= max;
}

function readPrimitive(r: Reader, type: Primitive): unknown {
  switch (type) {
    case 'int8':
      return r.int8();
    case 'int16':
      return r.int16();
    case 'int32':
      return r.int32();
    case 'uint32':
      return r.uint32();
    case 'int64':
      return r.int64();
    case 'bool':
      return r.int8() !== 0;
    case 'string':
      return r.nstring() ?? '';
    case 'nstring':
      return r.nstring();
    case 'bytes':
      return r.nbytes() ?? Buffer.alloc(0);
    case 'nbytes':
      return r.nbytes();
  }
}

function defaultOf(type: FieldType): unknown {
  if (typeof type !== 'string') return type.nullable ? null : [];
  switch (type) {
    case 'int64':
      return 0n;
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'nstring':
    case 'nbytes':
      return null;
    case 'bytes':
      return Buffer.alloc(0);
    default:
      return 0;
  }
}

function readType(r: Reader, type: FieldType, version: number): unknown {
  if (typeof type === 'string') return readPrimitive(r, type);
  const n = r.int32();
  if (n < 0) return type.nullable ? null : [];
  const out: unknown[] = [];
  for (let i = 0; i < n; i++) {
    out.push(typeof type.array === 'string' ? readPrimitive(r, type.array) : decode(type.array, r, version));
  }
  return out;
}

/** Decodes a struct; fields absent from `version` get their type's zero value so handlers need no checks. */
export function decode(fields: Fields, r: Reader, version: number): Struct {
  const out: Struct = {};
  for (const field of fields) {
    out[field[0]] = inVersion(field, version) ? readType(r, field[1], version) : defaultOf(field[1]);
  }
  return out;
}

function writePrimitive(w: Writer, type: Primitive, v: unknown): void {
  switch (type) {
    case 'int8':
      w.int8(Number(v ?? 0));
      return;
    case 'int16':
      w.int16(Number(v ?? 0));
      return;
    case 'int32':
      w.int32(Number(v ?? 0));
      return;
    case 'uint32':
      w.uint32(Number(v ?? 0));
      return;
    case 'int64':
      w.int64((v as bigint | number | undefined) ?? 0);
      return;
    case 'bool':
      w.int8(v ? 1 : 0);
      return;
    case 'string':
      w.nstring((v as string | undefined) ?? '');
      return;
    case 'nstring':
      w.nstring(v as string | null | undefined);
      return;
    case 'bytes':
      w.nbytes((v as Buffer | undefined) ?? Buffer.alloc(0));
      return;
    case 'nbytes':
      w.nbytes(v as Buffer | null | undefined);
      return;
  }
}

function writeType(w: Writer, type: FieldType, v: unknown, version: number): void {
  if (typeof type === 'string') {
    writePrimitive(w, type, v);
    return;
  }
  if (v === null || v === undefined) {
    w.int32(type.nullable && v === null ? -1 : 0);
    return;
  }
  const items = v as unknown[];
  w.int32(items.length);
  for (const item of items) {
    if (typeof type.array === 'string') writePrimitive(w, type.array, item);
    else encode(type.array, w, version, item as Struct);
  }
}

/** Encodes a struct; missing values encode as the type's zero (empty string, 0, empty array). */
export function encode(fields: Fields, w: Writer, version: number, value: Struct): Writer {
  for (const field of fields) {
    if (inVersion(field, version)) writeType(w, field[1], value[field[0]], version);
  }
  return w;
}
