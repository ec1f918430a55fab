import { Bool, Field, Float64, Int32, Schema, Utf8 } from 'apache-arrow';
import { z } from 'zod';
import { DownstreamEndReasonSchema, HarnessOutcomeSchema } from './outcomes';

// `downstream/runs.parquet`: one row per (configuration, instance) run, as zod and as Arrow.

export const DOWNSTREAM_RUNS_SCHEMA_NAME = 'downstream.runs';
export const DOWNSTREAM_RUNS_SCHEMA_VERSION = 1;

const count = z.number().int().nonnegative();

/**
 * One (configuration, instance) run: the agent's cost and the harness's verdict. `outcome` is the harness's,
 * or `error` when the run failed before the harness could judge it (then `error` says why). `rounds` counts
 * model calls; tokens are summed over them (input = prompt tokens, output = completion tokens).
 */
export const DownstreamRunRowSchema = z.object({
  configuration: z.string().min(1),
  instanceId: z.string().min(1),
  resolved: z.boolean(),
  outcome: HarnessOutcomeSchema,
  rounds: count,
  inputTokens: count,
  outputTokens: count,
  patchBytes: count,
  endReason: DownstreamEndReasonSchema,
  error: z.string().nullable(),
});
export type DownstreamRunRow = z.infer<typeof DownstreamRunRowSchema>;

export const downstreamRunsArrowSchema = new Schema(
  [
    new Field('configuration', new Utf8(), false),
    new Field('instanceId', new Utf8(), false),
    new Field('resolved', new Bool(), false),
    new Field('outcome', new Utf8(), false),
    new Field('rounds', new Int32(), false),
    // Tokens and bytes as Float64: exact up to 2^53 and plain JS numbers when read back (Int64 would be BigInt).
    new Field('inputTokens', new Float64(), false),
    new Field('outputTokens', new Float64(), false),
    new Field('patchBytes', new Float64(), false),
    new Field('endReason', new Utf8(), false),
    new Field('error', new Utf8(), true),
  ],
  new Map([
    ['schemaName', DOWNSTREAM_RUNS_SCHEMA_NAME],
    ['schemaVersion', String(DOWNSTREAM_RUNS_SCHEMA_VERSION)],
  ]),
);
