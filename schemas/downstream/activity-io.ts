import { z } from 'zod';
import { ArtifactRefSchema } from '../artifact-ref';
import { AgentRetrieverSchema } from '../evaluation/config';
import { SandboxIsolationSchema } from '../sandbox';
import { RepoSourceSchema } from '../worktrees';
import { DownstreamAgentConfigSchema, DownstreamConfigSchema, DownstreamHarnessConfigSchema } from './config';
import { DownstreamRunRowSchema } from './runs';
import { DownstreamTableSchema, OutcomeCountsSchema } from './table';

// The downstream activities' inputs and outputs, and the workflow's result. Pure zod: workflows import the types.

const stageBase = {
  runId: z.string(),
  runDir: z.string(),
};

/** The environment settings the downstream checkouts need (lib/worktrees' bare-clone cache layout). */
const CheckoutSourceSchema = z.object({
  repoSource: RepoSourceSchema,
  cacheDir: z.string(),
});

export const PlanDownstreamInputSchema = z.object({
  ...stageBase,
  downstream: DownstreamConfigSchema,
  instancesFile: z.string(),
  /** Predictions artifacts by configuration name (from the evaluation stage), overriding the config's path. */
  predictions: z.record(z.string(), ArtifactRefSchema).default({}),
});
export type PlanDownstreamInput = z.input<typeof PlanDownstreamInputSchema>;

/**
 * The pairs still to run, compact so thousands fit a Temporal payload: names once, pairs as
 * [configuration index, instance index], instance-major (every configuration of an instance before the next
 * instance, so paired results accumulate from the start).
 */
export const PendingRunsSchema = z.object({
  configurations: z.array(z.string()),
  instanceIds: z.array(z.string()),
  pairs: z.array(z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()])),
});
export type PendingRuns = z.infer<typeof PendingRunsSchema>;

export const PlanDownstreamOutputSchema = z.object({
  plan: ArtifactRefSchema,
  total: z.number().int(),
  /** Pairs whose run record is already there and valid (a rerun or a resumed workflow skips them). */
  finished: z.number().int(),
  pending: PendingRunsSchema,
  instances: z.number().int(),
  invalidInstances: z.number().int(),
  /** Short warnings for the UI (missing predictions, skipped rows). */
  warnings: z.array(z.string()),
});
export type PlanDownstreamOutput = z.infer<typeof PlanDownstreamOutputSchema>;

/** A configuration with source `agent`: its served policy asked about every instance of the stage. */
export const RetrieveDownstreamCandidatesInputSchema = z.object({
  ...stageBase,
  configuration: z.string(),
  /** The agent retriever with the served checkpoint filled in (workflows/policy-server.ts `servedRetriever`). */
  retriever: AgentRetrieverSchema,
  instancesFile: z.string(),
  instances: z.array(z.string()).optional(),
  checkouts: CheckoutSourceSchema,
  isolation: SandboxIsolationSchema.optional(),
});
export type RetrieveDownstreamCandidatesInput = z.input<typeof RetrieveDownstreamCandidatesInputSchema>;

export const RetrieveDownstreamCandidatesOutputSchema = z.object({
  /** Evaluation-predictions rows (with the served checkpoint's columns), read by the plan like a predictions file. */
  predictions: ArtifactRefSchema,
  instances: z.number().int(),
  failed: z.number().int(),
  reused: z.number().int(),
});
export type RetrieveDownstreamCandidatesOutput = z.infer<typeof RetrieveDownstreamCandidatesOutputSchema>;

export const RunDownstreamPairInputSchema = z.object({
  ...stageBase,
  plan: ArtifactRefSchema,
  configuration: z.string(),
  instanceId: z.string(),
  agent: DownstreamAgentConfigSchema,
  harness: DownstreamHarnessConfigSchema,
  checkouts: CheckoutSourceSchema,
  runTimeoutMs: z.number().int().positive(),
});
export type RunDownstreamPairInput = z.input<typeof RunDownstreamPairInputSchema>;

export const RunDownstreamPairOutputSchema = z.object({
  row: DownstreamRunRowSchema,
  record: ArtifactRefSchema,
  /** True when a valid record was already there and nothing ran. */
  reused: z.boolean(),
});
export type RunDownstreamPairOutput = z.infer<typeof RunDownstreamPairOutputSchema>;

export const SummarizeDownstreamInputSchema = z.object({
  ...stageBase,
  plan: ArtifactRefSchema,
  bootstrap: z.object({ resamples: z.number().int(), seed: z.number().int(), confidence: z.number() }),
});
export type SummarizeDownstreamInput = z.input<typeof SummarizeDownstreamInputSchema>;
export const DownstreamSummaryOutputSchema = z.object({
  runs: ArtifactRefSchema,
  table: ArtifactRefSchema,
  tableValues: DownstreamTableSchema,
  /** Per configuration: harness outcomes and end reasons counted. */
  outcomes: z.record(z.string(), OutcomeCountsSchema),
  endReasons: z.record(z.string(), OutcomeCountsSchema),
  reportMarkdown: z.string(),
  reportHtml: z.string(),
});
export type DownstreamSummaryOutput = z.infer<typeof DownstreamSummaryOutputSchema>;

export const DownstreamResultSchema = DownstreamSummaryOutputSchema.extend({
  plan: ArtifactRefSchema,
  pairs: z.number().int(),
  /** Pairs run by this workflow (the rest were finished before it started). */
  ran: z.number().int(),
  reusedBeforeStart: z.number().int(),
});
export type DownstreamResult = z.infer<typeof DownstreamResultSchema>;
