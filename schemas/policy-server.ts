import { z } from 'zod';
import { AnswerFormatSchema } from './agent';

/**
 * The policy server's activity I/O (activities/policy-server.ts, lib/policy-server): which checkpoint of
 * which run to serve, and the endpoint that answers for it.
 */

/** `latest`, `best` (the highest validation metric) or a step number. */
export const CheckpointChoiceSchema = z.union([
  z.enum(['latest', 'best']),
  z.number().int().min(1, 'checkpoint: a step number is at least 1'),
]);
export type CheckpointChoice = z.infer<typeof CheckpointChoiceSchema>;

/** Which policy an agent retriever or a downstream source asks: this run's training, or an earlier run's. */
export const TrainedPolicySchema = z.union([
  z.literal('trained'),
  z
    .object({
      run: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'policy.run must be a runId'),
      checkpoint: CheckpointChoiceSchema.optional(),
    })
    .strict(),
]);

export type TrainedPolicy = z.infer<typeof TrainedPolicySchema>;

export const PolicyServerBackendSchema = z.enum(['auto', 'hf', 'vllm']);

/** What a trained-policy retriever is given once its server is up; every row and report records it. */
export const ServedPolicySchema = z.object({
  runId: z.string(),
  step: z.number().int(),
  adapterSha256: z.string().regex(/^[0-9a-f]{64}$/),
  baseModel: z.string(),
  /** The served model name, `<runId>/step-NNNNNNNN`. */
  model: z.string(),
  baseUrl: z.string(),
  backend: z.enum(['hf', 'vllm']),
  /** trainer/serve.py's request log on the serving node. */
  requestLog: z.string(),
});
export type ServedPolicy = z.infer<typeof ServedPolicySchema>;

export const ServePolicyInputSchema = z.object({
  /** The run whose checkpoint is served. */
  runId: z.string(),
  runDir: z.string(),
  /** A run store: a node with an empty data dir pulls the checkpoint and the trainer config from it. */
  store: z.string().nullable().default(null),
  checkpoint: CheckpointChoiceSchema,
  /** For `best`: the step the validation chose. */
  bestStep: z.number().int().nullable().default(null),
  python: z.string().min(1),
  backend: PolicyServerBackendSchema.default('auto'),
  host: z.string().default('127.0.0.1'),
  /** The workflow that waits for `policyServerReady`. */
  ownerWorkflowId: z.string(),
  /** Names this server among the owner's (a stage may serve more than one checkpoint over its life). */
  requestId: z.string(),
  readyTimeoutMs: z.number().int().min(1000).default(600_000),
});
export type ServePolicyInput = z.input<typeof ServePolicyInputSchema>;

/** The signal the serving activity sends its owner once the server answers (again, after a restart). */
export const PolicyServerReadySchema = ServedPolicySchema.extend({
  requestId: z.string(),
  attempt: z.number().int(),
  /** The checkpoint's own training config: how it answers and its turn limit. */
  trainedWith: z.object({ recipe: z.string(), answerFormat: AnswerFormatSchema, maxTurns: z.number().int() }),
});
export type PolicyServerReady = z.infer<typeof PolicyServerReadySchema>;

/** Heartbeat details: a retried attempt binds the same port, so the URL the stage holds stays good. */
export const PolicyServerHeartbeatSchema = z.object({ port: z.number().int().min(1), pid: z.number().int(), step: z.number().int() });

/** What the owner asks the GPU queue once a server's scope settled: reap that checkpoint's server if one is left. */
export const ReapPolicyServerInputSchema = z.object({
  runId: z.string(),
  runDir: z.string(),
  store: z.string().nullable().default(null),
  /** The step the server served (from its `policyServerReady`). */
  step: z.number().int().min(1),
});
export type ReapPolicyServerInput = z.input<typeof ReapPolicyServerInputSchema>;

/** What the reap found: no record (`none`: the server stopped itself), a dead one, one of another host, or a live one stopped. */
export const ReapPolicyServerOutputSchema = z.object({
  action: z.enum(['none', 'gone', 'other-host', 'terminated', 'killed']),
  pid: z.number().int().nullable(),
});
export type ReapPolicyServerOutput = z.infer<typeof ReapPolicyServerOutputSchema>;
