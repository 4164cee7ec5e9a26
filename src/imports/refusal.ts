/**
 * An import is all or nothing: a file that does not parse, a row that breaks its profile or a statement
 * that does not balance yields no lines, only a refusal. A refusal is a value (the parsers return it, never
 * throw it) that names the file, where in it (row, entry, statement) and the rule, on one line, so that the
 * command prints it and exits 2 (it is an AppError, VALIDATION_FAILED), `POST /api/v1/imports` answers 422
 * with it and the Imports page shows it.
 */
import { AppError } from '../domain/errors.ts';

export class ImportRefusal extends AppError {
  readonly file: string;
  /** Where in the file: `row 7`, `statement S1, entry 3 (AcctSvcrRef X)`, `header`; null for the whole file. */
  readonly where: string | null;
  readonly rule: string;

  constructor(file: string, where: string | null, rule: string) {
    const parts = [oneLine(file), where === null ? null : oneLine(where), oneLine(rule)];
    super('VALIDATION_FAILED', parts.filter((p) => p !== null).join(': '), {
      details: { file, where, rule },
    });
    this.name = 'ImportRefusal';
    this.file = file;
    this.where = where;
    this.rule = rule;
  }
}

export type ImportResult<T> = { ok: true; value: T } | { ok: false; refusal: ImportRefusal };

export function accepted<T>(value: T): ImportResult<T> {
  return { ok: true, value };
}

export function refused<T>(file: string, where: string | null, rule: string): ImportResult<T> {
  return { ok: false, refusal: new ImportRefusal(file, where, rule) };
}

/** The file's text: given as text, or bytes that must be UTF-8 (refused otherwise). */
export function utf8Text(file: string, content: string | Uint8Array): ImportResult<string> {
  if (typeof content === 'string') return accepted(content);
  try {
    return accepted(new TextDecoder('utf-8', { fatal: true }).decode(content));
  } catch {
    return refused(file, null, 'is not UTF-8 text');
  }
}

/** A value quoted in a rule: JSON-quoted, cut to 60 characters, so a hostile cell cannot break the line. */
export function quote(value: string): string {
  return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
}

/** Control characters (newlines included) become spaces: a refusal is printed as exactly one line. */
function oneLine(text: string): string {
  let out = '';
  for (const ch of text) out += ch.charCodeAt(0) < 32 || ch.charCodeAt(0) === 127 ? ' ' : ch;
  return out;
}
