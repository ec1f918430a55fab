import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every depth and `undefined` object members dropped, so two configs that
 * differ only in key order or in absent-vs-undefined options serialise identically. Values JSON cannot
 * represent faithfully (bigint, Map, Set, functions, symbols, non-finite numbers) are refused rather than
 * silently collapsed, because two different configs must never hash the same.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(canonicalize(value, '$'));
}

/** sha256 (hex) of `canonicalJson(value)`: the cache key of a stage's configuration. */
export function hashConfig(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalize(value: unknown, where: string): unknown {
  if (value === null) return null;
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError(`hashConfig: ${where} is ${value}, which JSON cannot represent`);
      return value;
    case 'undefined':
      // Only reachable for array items and the root; object members that are undefined are skipped below.
      return null;
    case 'object':
      break;
    default:
      throw new TypeError(`hashConfig: ${where} is a ${typeof value}, which has no canonical JSON form`);
  }
  if (Array.isArray(value)) return value.map((item, i) => canonicalize(item, `${where}[${i}]`));
  if (value instanceof Map || value instanceof Set) {
    throw new TypeError(`hashConfig: ${where} is a ${value.constructor.name}; convert it to a plain object or array`);
  }
  const withToJson = value as { toJSON?: () => unknown };
  if (typeof withToJson.toJSON === 'function') return canonicalize(withToJson.toJSON(), where);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const member = (value as Record<string, unknown>)[key];
    if (member === undefined) continue;
    out[key] = canonicalize(member, `${where}.${key}`);
  }
  return out;
}
