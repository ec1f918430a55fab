import { existsSync, statSync } from 'node:fs';
import type { z } from 'zod';
import { InputFileError } from '../../artifacts';
import { DownstreamInstanceSchema, type DownstreamInstance } from '../../../schemas/downstream/instance';
import { validRows } from './valid-rows';

export interface DownstreamInstances {
  instances: DownstreamInstance[];
  /** Rows that could not be used, one line each (skipped and reported, never fatal on their own). */
  invalid: string[];
}

/**
 * The instances the stage runs: every valid row of `file`, or the `subset` ids in their order. A missing file,
 * an unknown subset id or no valid instance at all fails (InputFileError), naming the config key to fix.
 */
export async function readDownstreamInstances(file: string, subset: readonly string[] | undefined): Promise<DownstreamInstances> {
  if (!existsSync(file) || !statSync(file).isFile()) {
    throw new InputFileError(file, `downstream.instancesFile (or inputs.instances): file ${file} does not exist`);
  }
  const read = await readInstanceRows(file);
  let instances = read.instances;
  if (subset) {
    const byId = new Map(instances.map((i) => [i.instance_id, i]));
    const unknown = subset.filter((id) => !byId.has(id));
    if (unknown.length > 0) {
      const invalidIds = unknown.filter((id) => read.invalid.some((line) => line.includes(`(${id})`)));
      throw new InputFileError(
        file,
        `downstream.instances: ${unknown.length} id(s) are not valid instances of ${file}: ${unknown.slice(0, 10).join(', ')}${unknown.length > 10 ? ', …' : ''}` +
          (invalidIds.length > 0
            ? ` (unreadable rows: ${read.invalid
                .filter((l) => invalidIds.some((id) => l.includes(`(${id})`)))
                .slice(0, 3)
                .join('; ')})`
            : ''),
      );
    }
    instances = subset.map((id) => byId.get(id)!);
  }
  if (instances.length === 0) {
    throw new InputFileError(
      file,
      `downstream: ${file} has no valid instance${read.invalid.length > 0 ? ` (${read.invalid.length} unreadable rows; first: ${read.invalid[0]})` : ''}`,
    );
  }
  return { instances, invalid: read.invalid };
}

/** Every row of the file checked; a repeated instance id keeps its first row. */
async function readInstanceRows(file: string): Promise<DownstreamInstances> {
  const instances: DownstreamInstance[] = [];
  const invalid: string[] = [];
  const seen = new Map<string, number>();
  for await (const { ordinal, row } of validRows(file, DownstreamInstanceSchema, invalid, describeInvalidInstance)) {
    const first = seen.get(row.instance_id);
    if (first !== undefined) {
      invalid.push(`row ${ordinal}: instance ${row.instance_id} again (first on row ${first}); ignored`);
      continue;
    }
    seen.set(row.instance_id, ordinal);
    instances.push(row);
  }
  return { instances, invalid };
}

/** A rejected instance row by its id, when it has one, and its first problem. */
function describeInvalidInstance(ordinal: number, row: unknown, error: z.ZodError): string {
  const issue = error.issues[0]!;
  const id = (row as { instance_id?: unknown } | null)?.instance_id;
  return `row ${ordinal}${typeof id === 'string' ? ` (${id})` : ''}: ${issue.path.length > 0 ? `column ${issue.path.join('.')}: ` : ''}${issue.message}`;
}
