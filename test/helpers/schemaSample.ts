import type { JsonSchema } from '../../src/api/endpoint.js';

/**
 * The smallest value a JSON schema accepts: required properties only, first alternatives, minimums, dates a
 * day from now. Enough for the simple inputs of most endpoints; callers check the result with the schema.
 */
export function sampleOf(schema: JsonSchema): unknown {
  if ('default' in schema) return schema.default;
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  if (Array.isArray(schema.oneOf)) return sampleOf(schema.oneOf[0] as JsonSchema);
  if (Array.isArray(schema.anyOf)) return sampleOf(schema.anyOf[0] as JsonSchema);
  switch (schema.type) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
      return Object.fromEntries(((schema.required ?? []) as string[]).map((p) => [p, sampleOf(properties[p] ?? {})]));
    }
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return (schema.minimum as number | undefined) ?? 1;
    case 'boolean':
      return false;
    case 'string':
      return schema.format === 'date-time' ? new Date(Date.now() + 24 * 3600_000).toISOString() : 'x'.repeat((schema.minLength as number | undefined) ?? 1);
    default:
      return {};
  }
}
