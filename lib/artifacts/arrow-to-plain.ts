import * as arrow from 'apache-arrow';

/**
 * Plain JS rows from an Arrow table: lists become arrays, structs and maps become objects, and 64-bit
 * integers become numbers when they fit in a double exactly (otherwise they stay bigint rather than lose
 * digits). Stages downstream then work with ordinary objects, whichever format the input came in.
 */
export function* tableToPlainRows(table: arrow.Table): Generator<Record<string, unknown>> {
  const fields = table.schema.fields;
  const columns = fields.map((_, i) => table.getChildAt(i)!);
  for (let r = 0; r < table.numRows; r++) {
    const row: Record<string, unknown> = {};
    for (let c = 0; c < fields.length; c++) row[fields[c]!.name] = arrowValueToPlain(columns[c]!.get(r), fields[c]!.type);
    yield row;
  }
}

export function arrowValueToPlain(value: unknown, type: arrow.DataType): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') {
    return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
  }
  if (arrow.DataType.isList(type) || arrow.DataType.isFixedSizeList(type)) {
    const vector = value as arrow.Vector;
    const itemType = type.children[0]!.type;
    const out = new Array<unknown>(vector.length);
    for (let i = 0; i < vector.length; i++) out[i] = arrowValueToPlain(vector.get(i), itemType);
    return out;
  }
  if (arrow.DataType.isStruct(type)) {
    const struct = value as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const child of type.children) out[child.name] = arrowValueToPlain(struct[child.name], child.type);
    return out;
  }
  if (arrow.DataType.isMap(type)) {
    const entryType = type.children[0]!.type as arrow.Struct;
    const valueType = entryType.children[1]!.type;
    const out: Record<string, unknown> = {};
    for (const [key, v] of value as Iterable<[unknown, unknown]>) out[String(key)] = arrowValueToPlain(v, valueType);
    return out;
  }
  return value;
}
