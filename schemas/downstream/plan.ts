import { z } from 'zod';
import { InjectionSourceSchema } from './injection';
import { DownstreamInstanceSchema } from './instance';

// `downstream/plans/<hash>.json`: what the stage will run, written once per (config, inputs) by lib/downstream/plan/plan.ts.

export const DOWNSTREAM_PLAN_SCHEMA_NAME = 'downstream.plan';
export const DOWNSTREAM_PLAN_SCHEMA_VERSION = 1;

export const PlannedConfigurationSchema = z.object({
  name: z.string(),
  source: InjectionSourceSchema,
  k: z.number().int().optional(),
  /** Where a predictions configuration's files came from (file path or artifact uri), with its sha256. */
  predictionsFrom: z
    .object({
      uri: z.string(),
      sha256: z.string(),
      format: z.enum(['jsonl', 'parquet']),
      /** The retriever whose rows were read (Parquet with a retriever column), else null. */
      retriever: z.string().nullable(),
      /** A trained policy's checkpoint, as its rows name it (the evaluation's `policy` retriever), else null. */
      policy: z
        .object({ model: z.string(), baseModel: z.string(), step: z.number().int(), adapterSha256: z.string() })
        .nullable()
        .default(null),
    })
    .nullable(),
  /** Instances of the plan the predictions source has no row for (they run with the issue unchanged). */
  missingPredictions: z.array(z.string()),
  /** Unusable lines/rows of the predictions source, described. */
  predictionErrors: z.array(z.string()),
});
export type PlannedConfiguration = z.infer<typeof PlannedConfigurationSchema>;

export const PlannedPairSchema = z.object({
  configuration: z.string(),
  instanceId: z.string(),
  /** Config hash of this run: what makes a finished record reusable (see lib/downstream/runs/run-identity.ts). */
  runHash: z.string(),
  /** The run record's path. */
  recordPath: z.string(),
  /** The retriever's files for a predictions configuration (null for none/oracle, [] when it has no row). */
  predictedFiles: z.array(z.string()).nullable(),
});
export type PlannedPair = z.infer<typeof PlannedPairSchema>;

export const DownstreamPlanSchema = z.object({
  runId: z.string(),
  baseline: z.string(),
  agent: z.string(),
  harness: z.string(),
  instancesFile: z.string(),
  configurations: z.array(PlannedConfigurationSchema),
  instances: z.array(DownstreamInstanceSchema),
  /** Rows of the instances file that could not be read, one line each (skipped, reported). */
  invalidInstances: z.array(z.string()),
  pairs: z.array(PlannedPairSchema),
});
export type DownstreamPlan = z.infer<typeof DownstreamPlanSchema>;
