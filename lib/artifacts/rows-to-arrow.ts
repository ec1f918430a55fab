import * as arrow from 'apache-arrow';

/**
 * Turns plain JS rows into an Arrow RecordBatch with exactly the given schema. Every value is checked against
 * its declared type first (types are never inferred), so a wrong value fails with the row, the column path
 * and what was expected, instead of being coerced into a plausible-looking wrong number or string.
 */
export function rowsToRecordBatch(schema: arrow.Schema, rows: readonly Record<string, unknown>[], firstRowNumber = 1): arrow.RecordBatch {
  const known = new Set(schema.fields.map((f) => f.name));
  const columns: unknown[][] = schema.fields.map(() => new Array<unknown>(rows.length));
  rows.forEach((row, r) => {
    const rowNumber = firstRowNumber + r;
    if (row === null || typeof row !== 'object' || Array.isArray(row)) {
      throw new ArrowRowError(rowNumber, '(row)', `expected an object, got ${describe(row)}`);
    }
    for (const key of Object.keys(row)) {
      if (!known.has(key) && row[key] !== undefined) {
        throw new ArrowRowError(rowNumber, key, `is not a column of the schema (columns: ${[...known].join(', ')})`);
      }
    }
    schema.fields.forEach((field, c) => {
      columns[c]![r] = normalizeValue(field, row[field.name], rowNumber, field.name);
    });
  });
  const children = schema.fields.map((field, c) => {
    const builder = arrow.makeBuilder({ type: field.type, nullValues: [null] });
    for (const value of columns[c]!) builder.append(value);
    return builder.finish().flush();
  });
  const data = arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children });
  return new arrow.RecordBatch(schema, data);
}

/** Fails fast, before any row is read, on a schema holding a type the row converter does not handle. */
export function assertSupportedSchema(schema: arrow.Schema, what: string): void {
  for (const field of schema.fields) assertSupportedType(field.type, field.name, what);
}

export class ArrowRowError extends Error {
  override readonly name = 'ArrowRowError';
  constructor(
    readonly rowNumber: number,
    readonly column: string,
    detail: string,
  ) {
    super(`row ${rowNumber}, column ${column}: ${detail}`);
  }
}

const SUPPORTED = 'utf8, large utf8, bool, int8..int64, uint8..uint64, float32, float64, list, struct';

function assertSupportedType(type: arrow.DataType, where: string, what: string): void {
  if (arrow.DataType.isList(type)) return assertSupportedType(type.children[0]!.type, `${where}[]`, what);
  if (arrow.DataType.isStruct(type)) {
    for (const child of type.children) assertSupportedType(child.type, `${where}.${child.name}`, what);
    return;
  }
  if (
    arrow.DataType.isUtf8(type) ||
    arrow.DataType.isLargeUtf8(type) ||
    arrow.DataType.isBool(type) ||
    arrow.DataType.isInt(type) ||
    (arrow.DataType.isFloat(type) && type.precision !== arrow.Precision.HALF)
  ) {
    return;
  }
  throw new TypeError(
    `Artifact ${what}: column ${where} has Arrow type ${String(type)}, which rows cannot be converted to (supported: ${SUPPORTED})`,
  );
}

function normalizeValue(field: arrow.Field, value: unknown, row: number, where: string): unknown {
  if (value === undefined || value === null) {
    if (!field.nullable) throw new ArrowRowError(row, where, `is not nullable but is ${value === null ? 'null' : 'missing'}`);
    return null;
  }
  const type = field.type as arrow.DataType;
  if (arrow.DataType.isUtf8(type) || arrow.DataType.isLargeUtf8(type)) {
    if (typeof value !== 'string') throw new ArrowRowError(row, where, `expected a string, got ${describe(value)}`);
    return value;
  }
  if (arrow.DataType.isBool(type)) {
    if (typeof value !== 'boolean') throw new ArrowRowError(row, where, `expected a boolean, got ${describe(value)}`);
    return value;
  }
  if (arrow.DataType.isFloat(type)) {
    if (typeof value !== 'number') throw new ArrowRowError(row, where, `expected a number, got ${describe(value)}`);
    return value;
  }
  if (arrow.DataType.isInt(type)) return normalizeInteger(type, value, row, where);
  if (arrow.DataType.isList(type)) {
    // A typed array of the items' own integer type holds only valid values: no per-item check or copy.
    if (isIntArrayOf(value, type.children[0]!.type)) return value;
    if (!Array.isArray(value)) throw new ArrowRowError(row, where, `expected an array, got ${describe(value)}`);
    const item = type.children[0]!;
    return value.map((v, i) => normalizeValue(item, v, row, `${where}[${i}]`));
  }
  if (arrow.DataType.isStruct(type)) {
    if (typeof value !== 'object' || Array.isArray(value))
      throw new ArrowRowError(row, where, `expected an object, got ${describe(value)}`);
    const record = value as Record<string, unknown>;
    const names = new Set(type.children.map((c) => c.name));
    for (const key of Object.keys(record)) {
      if (!names.has(key) && record[key] !== undefined) {
        throw new ArrowRowError(row, `${where}.${key}`, `is not a field of the struct (fields: ${[...names].join(', ')})`);
      }
    }
    const out: Record<string, unknown> = {};
    for (const child of type.children) out[child.name] = normalizeValue(child, record[child.name], row, `${where}.${child.name}`);
    return out;
  }
  throw new ArrowRowError(row, where, `has unsupported Arrow type ${String(type)}`);
}

function isIntArrayOf(value: unknown, type: arrow.DataType): boolean {
  if (!arrow.DataType.isInt(type) || type.bitWidth > 32) return false;
  const signed = value instanceof Int8Array || value instanceof Int16Array || value instanceof Int32Array;
  const unsigned = value instanceof Uint8Array || value instanceof Uint16Array || value instanceof Uint32Array;
  return ((signed && type.isSigned) || (unsigned && !type.isSigned)) && (value as Int32Array).BYTES_PER_ELEMENT * 8 === type.bitWidth;
}

function normalizeInteger(type: arrow.Int, value: unknown, row: number, where: string): number | bigint {
  const bits = type.bitWidth;
  if (bits < 64) {
    const min = type.isSigned ? -(2 ** (bits - 1)) : 0;
    const max = type.isSigned ? 2 ** (bits - 1) - 1 : 2 ** bits - 1;
    const n = typeof value === 'bigint' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n)) throw new ArrowRowError(row, where, `expected an integer, got ${describe(value)}`);
    if (n < min || n > max) throw new ArrowRowError(row, where, `${n} is out of range for ${String(type)}`);
    return n;
  }
  // Arrow's 64-bit builders take bigint.
  let big: bigint;
  if (typeof value === 'bigint') big = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) big = BigInt(value);
  else throw new ArrowRowError(row, where, `expected an integer (a safe integer number or a bigint), got ${describe(value)}`);
  const min = type.isSigned ? -(2n ** 63n) : 0n;
  const max = type.isSigned ? 2n ** 63n - 1n : 2n ** 64n - 1n;
  if (big < min || big > max) throw new ArrowRowError(row, where, `${big} is out of range for ${String(type)}`);
  return big;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  return typeof value === 'object' ? 'an object' : typeof value;
}
