/**
 * Schema drift: fields the provider sends that the contract does not name. Response schemas are loose
 * (they keep such fields); `unknownFields` lists them so the client can log each one once.
 */
import type { z } from 'zod';

interface Def {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  options?: readonly z.ZodType[];
}

function defOf(schema: z.ZodType): Def {
  return (schema as unknown as { _zod: { def: Def } })._zod.def;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Dotted paths of the fields in `value` that `schema` does not declare (array items as `[]`, so a
 * list reports a field once). Records and unions are not descended into: any key is legal there.
 */
export function unknownFields(schema: z.ZodType, value: unknown, path = ''): string[] {
  const out = new Set<string>();
  walk(schema, value, path, out);
  return [...out];
}

function walk(schema: z.ZodType, value: unknown, path: string, out: Set<string>): void {
  const def = defOf(schema);
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'readonly':
    case 'nonoptional':
    case 'catch':
      if (def.innerType) walk(def.innerType, value, path, out);
      return;
    case 'pipe':
      if (def.in) walk(def.in, value, path, out);
      return;
    case 'array':
      if (def.element && Array.isArray(value)) {
        for (const item of value) walk(def.element, item, `${path}[]`, out);
      }
      return;
    case 'object': {
      if (!def.shape || !isPlainObject(value)) return;
      for (const [key, v] of Object.entries(value)) {
        const field = path === '' ? key : `${path}.${key}`;
        const child = def.shape[key];
        if (child) walk(child, v, field, out);
        else out.add(field);
      }
      return;
    }
    default:
      return;
  }
}
