import { z } from 'zod';
import { HarnessOutcomeSchema, TestStatusSchema } from './outcomes';
import { DownstreamRunRowSchema } from './runs';

// `downstream/runs/<configuration>/<instance>.json`: the durable truth of one run, which a retry or a rerun reuses.

export const DOWNSTREAM_RUN_RECORD_SCHEMA_NAME = 'downstream.run-record';
/** 2: the row names the served policy (schemas/downstream/runs.ts). */
export const DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION = 2;

/** One agent action, for action-level case studies (CodeGrep App. F, Table 8). */
export const DownstreamActionSchema = z.object({
  round: z.number().int().positive(),
  tool: z.string(),
  /** The editor command, or the terminal command line (cut to 200 characters). */
  command: z.string().nullable(),
  path: z.string().nullable(),
});
export type DownstreamAction = z.infer<typeof DownstreamActionSchema>;

/** A file the agent changed that is not in the recorded patch, and why (lib/downstream/runs/workspace-patch.ts). */
export const PatchDroppedFileSchema = z.object({
  /** Relative to the checkout's root. */
  path: z.string(),
  /** Its share of the patch (over the cap), or its size on disk (a name git refuses). */
  bytes: z.number().int().nonnegative(),
  reason: z.enum(['patch-size-cap', 'name-git-refuses']),
});
export type PatchDroppedFile = z.infer<typeof PatchDroppedFileSchema>;

export const DownstreamRunRecordSchema = z.object({
  row: DownstreamRunRowSchema,
  runHash: z.string(),
  injection: z
    .object({
      files: z.array(z.string()),
      dropped: z.array(z.object({ path: z.string(), reason: z.string() })),
      /** Predictions configurations: whether the retriever had a row for the instance. */
      hadPrediction: z.boolean().nullable(),
    })
    .nullable(),
  patch: z.string(),
  /** The agent's changes left out of `patch` (absent in records written before the cap existed). */
  patchDropped: z.array(PatchDroppedFileSchema).default([]),
  actions: z.array(DownstreamActionSchema),
  harness: z
    .object({
      outcome: HarnessOutcomeSchema,
      failToPass: z.array(TestStatusSchema),
      passToPass: z.array(TestStatusSchema),
      /** The harness log's tail. */
      log: z.string(),
    })
    .nullable(),
  /** The full conversation, beside the record (`<record>.trajectory.json`); null when the agent gave none. */
  trajectoryPath: z.string().nullable(),
  startedAt: z.string(),
  durationMs: z.number().nonnegative(),
  /** Temporal attempt of the activity that produced it (> 1 after a retry). */
  attempt: z.number().int().positive(),
});
export type DownstreamRunRecord = z.infer<typeof DownstreamRunRecordSchema>;
