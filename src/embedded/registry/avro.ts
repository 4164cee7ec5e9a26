/**
 * Avro parsing and the compatibility rules, with avsc. BACKWARD means the new schema can read data
 * written with the old one (`newType.createResolver(oldType)` succeeds); FORWARD the reverse; FULL both.
 * The `_TRANSITIVE` levels check every live version of the subject, the others only the latest.
 */
import avsc from 'avsc';
import type { CompatibilityLevel } from './store.ts';

export type AvroType = avsc.Type;

/** A parsed schema, with the named types of its references already known. */
export function parseAvro(schema: string, referenced: readonly string[] = []): AvroType {
  const registry: Record<string, AvroType> = {};
  for (const text of referenced) avsc.Type.forSchema(JSON.parse(text) as avsc.Schema, { registry });
  return avsc.Type.forSchema(JSON.parse(schema) as avsc.Schema, { registry });
}

/** Minified JSON: the form ids are assigned to, so whitespace never makes a new id. */
export function canonicalText(schema: string): string {
  return JSON.stringify(JSON.parse(schema));
}

/** Reasons the candidate breaks `level` against the existing types (oldest first); empty when compatible. */
export function compatibilityProblems(
  level: CompatibilityLevel,
  candidate: AvroType,
  existing: readonly AvroType[],
): string[] {
  if (level === 'NONE' || existing.length === 0) return [];
  const against = level.endsWith('_TRANSITIVE') ? existing : existing.slice(-1);
  const backward = level.startsWith('BACKWARD') || level.startsWith('FULL');
  const forward = level.startsWith('FORWARD') || level.startsWith('FULL');
  const problems: string[] = [];
  for (const old of against) {
    if (backward) {
      const why = resolveProblem(candidate, old);
      if (why) problems.push(`the new schema cannot read data written with an existing one: ${why}`);
    }
    if (forward) {
      const why = resolveProblem(old, candidate);
      if (why) problems.push(`an existing schema cannot read data written with the new one: ${why}`);
    }
  }
  return problems;
}

function resolveProblem(reader: AvroType, writer: AvroType): string | null {
  try {
    reader.createResolver(writer);
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}
