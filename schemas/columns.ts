import * as arrow from 'apache-arrow';
import { z } from 'zod';

/**
 * One list of columns per artifact, from which both its Arrow schema (what the Parquet file holds) and its zod
 * row schema (what readers check) are derived, so the two cannot drift apart. A column's zod schema defaults to
 * its Arrow type's (utf8 → string, int32 → integer, …); pass a stricter one (`utf8(z.string().min(1))`, an enum)
 * where rows must satisfy more than their type.
 *
 *   const candidate = columns({ path: utf8(z.string().min(1)), tokens: int32(), error: nullable(utf8()) });
 *   candidate.zod          // z.object({ path: …, tokens: …, error: … })
 *   candidate.arrowSchema() // Schema<[path: Utf8, tokens: Int32, error: Utf8 (nullable)]>
 */
export interface Column<Z extends z.ZodType = z.ZodType> {
  readonly arrowType: () => arrow.DataType;
  readonly nullable: boolean;
  readonly zod: Z;
}

const column = <Z extends z.ZodType>(arrowType: () => arrow.DataType, zod: Z, isNullable = false): Column<Z> => ({
  arrowType,
  zod,
  nullable: isNullable,
});

export function utf8(): Column<z.ZodString>;
export function utf8<Z extends z.ZodType<string>>(zod: Z): Column<Z>;
export function utf8(zod: z.ZodType = z.string()): Column {
  return column(() => new arrow.Utf8(), zod);
}

export function int32(): Column<z.ZodNumber>;
export function int32<Z extends z.ZodType<number>>(zod: Z): Column<Z>;
export function int32(zod: z.ZodType = z.number().int()): Column {
  return column(() => new arrow.Int32(), zod);
}

export function float64(): Column<z.ZodNumber>;
export function float64<Z extends z.ZodType<number>>(zod: Z): Column<Z>;
export function float64(zod: z.ZodType = z.number()): Column {
  return column(() => new arrow.Float64(), zod);
}

export function bool(): Column<z.ZodBoolean>;
export function bool<Z extends z.ZodType<boolean>>(zod: Z): Column<Z>;
export function bool(zod: z.ZodType = z.boolean()): Column {
  return column(() => new arrow.Bool(), zod);
}

/** The same column, null allowed (Arrow field nullable, zod `.nullable()`). */
export const nullable = <Z extends z.ZodType>(of: Column<Z>): Column<z.ZodNullable<Z>> => column(of.arrowType, of.zod.nullable(), true);

/** Null allowed, and in zod the key may also be absent or undefined (`.nullish()`): code may leave it out, Parquet gives null. */
export const nullish = <Z extends z.ZodType>(of: Column<Z>): Column<z.ZodOptional<z.ZodNullable<Z>>> =>
  column(of.arrowType, of.zod.nullish(), true);

/** A list column; its items are non-null unless `of` is `nullable(…)`. `zod` overrides the array schema (e.g. `.min(1)`). */
export function list<Z extends z.ZodType>(of: Column<Z>): Column<z.ZodArray<Z>>;
export function list<A extends z.ZodType>(of: Column, zod: A): Column<A>;
export function list(of: Column, zod?: z.ZodType): Column {
  return column(() => new arrow.List(new arrow.Field('item', of.arrowType(), of.nullable)), zod ?? z.array(of.zod));
}

export type ColumnShape = Record<string, Column>;
type ZodShapeOf<C extends ColumnShape> = { [K in keyof C]: C[K]['zod'] };

/** A struct column of `fields` (zod: an object of the fields' schemas, or `zod` when given, e.g. one with a refine). */
export function struct<C extends ColumnShape>(fields: C): Column<z.ZodObject<ZodShapeOf<C>>>;
export function struct<S extends z.ZodType>(fields: ColumnShape, zod: S): Column<S>;
export function struct(fields: ColumnShape, zod?: z.ZodType): Column {
  return column(() => new arrow.Struct(arrowFields(fields)), zod ?? zodObject(fields));
}

function arrowFields(shape: ColumnShape): arrow.Field[] {
  return Object.entries(shape).map(([name, c]) => new arrow.Field(name, c.arrowType(), c.nullable));
}

function zodObject<C extends ColumnShape>(shape: C): z.ZodObject<ZodShapeOf<C>> {
  return z.object(Object.fromEntries(Object.entries(shape).map(([name, c]) => [name, c.zod])) as ZodShapeOf<C>);
}

export interface Columns<C extends ColumnShape> {
  readonly shape: C;
  /** The zod row schema: one key per column, in column order. */
  readonly zod: z.ZodObject<ZodShapeOf<C>>;
  /** The Arrow fields, in column order. */
  fields(): arrow.Field[];
  /** The Arrow schema; `metadata` goes into the schema's key-value metadata. */
  arrowSchema(metadata?: Record<string, string>): arrow.Schema;
}

export function columns<C extends ColumnShape>(shape: C): Columns<C> {
  return {
    shape,
    zod: zodObject(shape),
    fields: () => arrowFields(shape),
    arrowSchema: (metadata) => new arrow.Schema(arrowFields(shape), metadata ? new Map(Object.entries(metadata)) : undefined),
  };
}
