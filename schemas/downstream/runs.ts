import { z } from 'zod';
import { bool, columns, float64, int32, nullable, utf8 } from '../columns';
import { DownstreamEndReasonSchema, HarnessOutcomeSchema } from './outcomes';

// `downstream/runs.parquet`: one row per (configuration, instance) run; one column list gives its zod and its Arrow schema.

export const DOWNSTREAM_RUNS_SCHEMA_NAME = 'downstream.runs';
export const DOWNSTREAM_RUNS_SCHEMA_VERSION = 1;

const count = z.number().int().nonnegative();

/**
 * One (configuration, instance) run: the agent's cost and the harness's verdict. `outcome` is the harness's,
 * or `error` when the run failed before the harness could judge it (then `error` says why). `rounds` counts
 * model calls; tokens are summed over them (input = prompt tokens, output = completion tokens).
 */
export const downstreamRunColumns = columns({
  configuration: utf8(z.string().min(1)),
  instanceId: utf8(z.string().min(1)),
  resolved: bool(),
  outcome: utf8(HarnessOutcomeSchema),
  rounds: int32(count),
  // Tokens and bytes as Float64: exact up to 2^53 and plain JS numbers when read back (Int64 would be BigInt).
  inputTokens: float64(count),
  outputTokens: float64(count),
  patchBytes: float64(count),
  endReason: utf8(DownstreamEndReasonSchema),
  error: nullable(utf8()),
});
export const DownstreamRunRowSchema = downstreamRunColumns.zod;
export type DownstreamRunRow = z.infer<typeof DownstreamRunRowSchema>;

export const downstreamRunsArrowSchema = downstreamRunColumns.arrowSchema({
  schemaName: DOWNSTREAM_RUNS_SCHEMA_NAME,
  schemaVersion: String(DOWNSTREAM_RUNS_SCHEMA_VERSION),
});
