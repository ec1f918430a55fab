import { z } from 'zod';
import { bool, columns, float64, int32, nullable, utf8 } from '../columns';
import { DownstreamEndReasonSchema, HarnessOutcomeSchema } from './outcomes';

// `downstream/runs.parquet`: one row per (configuration, instance) run; one column list gives its zod and its Arrow schema.

export const DOWNSTREAM_RUNS_SCHEMA_NAME = 'downstream.runs';
/** 2: the served-policy columns (servedModel, baseModel, checkpointStep, adapterSha256). */
export const DOWNSTREAM_RUNS_SCHEMA_VERSION = 2;

const count = z.number().int().nonnegative();

/**
 * One (configuration, instance) run: the agent's cost and the harness's verdict. `outcome` is the harness's,
 * or `error` when the run failed before the harness could judge it (then `error` says why). `rounds` counts
 * model calls; tokens are summed over them (input = prompt tokens, output = completion tokens). A configuration
 * that injects a trained policy's files names the checkpoint that chose them (README "Serving and evaluating the
 * trained policy": the served model `<runId>/step-NNNNNNNN`, its base model, step and the sha256 of
 * `adapter_model.safetensors`); for every other configuration these four are null.
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
  servedModel: nullable(utf8()),
  baseModel: nullable(utf8()),
  checkpointStep: nullable(int32()),
  adapterSha256: nullable(utf8(z.string().regex(/^[0-9a-f]{64}$/))),
});
export const DownstreamRunRowSchema = downstreamRunColumns.zod;
export type DownstreamRunRow = z.infer<typeof DownstreamRunRowSchema>;
/** The served-policy columns of a row, set from the plan's configuration (lib/downstream/runs/run-pair.ts). */
export type DownstreamRunPolicyColumns = Pick<DownstreamRunRow, 'servedModel' | 'baseModel' | 'checkpointStep' | 'adapterSha256'>;
/** A row as one run's agent and harness produce it, before the configuration's policy columns are added. */
export type DownstreamRunOutcomeRow = Omit<DownstreamRunRow, keyof DownstreamRunPolicyColumns>;

export const downstreamRunsArrowSchema = downstreamRunColumns.arrowSchema({
  schemaName: DOWNSTREAM_RUNS_SCHEMA_NAME,
  schemaVersion: String(DOWNSTREAM_RUNS_SCHEMA_VERSION),
});
