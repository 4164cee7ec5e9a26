/**
 * A line's identity makes imports idempotent: importing a file twice, or two statements that overlap,
 * gives the same identities for the same lines, so each line is stored once. An identity is the SHA-256
 * (hex) of a JSON array of text, an encoding that no two different lists of parts share: the account and
 * the reference the bank or provider gave the line when there is one, else the line's normalised content
 * and its occurrence among identical lines of the same statement (two equal fees on one day stay two).
 */
import { createHash } from 'node:crypto';

function sha256Json(parts: readonly string[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex');
}

/** The identity of a line that carries its own reference (a camt.053 AcctSvcrRef, a report's id columns). */
export function referenceIdentity(scope: string, references: readonly string[]): string {
  return sha256Json(['ref', scope, ...references]);
}

/**
 * The identity of a line without a reference: its normalised content (see `normaliseText`) and its
 * occurrence (1 for the first line with that content in its statement, 2 for the next ...).
 */
export function contentIdentity(scope: string, content: readonly string[], occurrence: number): string {
  return sha256Json(['content', scope, ...content, String(occurrence)]);
}

/**
 * The hash of a line's whole content, identity or not: a line seen again under the same identity with
 * another content hash is a correction, not a duplicate.
 */
export function contentHash(content: readonly string[]): string {
  return sha256Json(content);
}

/** Free text as compared: Unicode NFC, runs of white space as one space, no space at either end. */
export function normaliseText(text: string): string {
  return text.normalize('NFC').replace(/\s+/g, ' ').trim();
}

/**
 * Gives each content its occurrence number in the order seen: the first line with a given content is 1,
 * the next equal one 2, and so on.
 */
export function occurrenceCounter(): (content: readonly string[]) => number {
  const seen = new Map<string, number>();
  return (content) => {
    const key = JSON.stringify(content);
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    return n;
  };
}
