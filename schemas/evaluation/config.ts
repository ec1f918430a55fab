import { z } from 'zod';
import { BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED } from './bootstrap-defaults';
import { AgentLimitsSchema, AnswerFormatSchema } from '../agent';
import { SandboxConfigSchema } from '../sandbox';
import { CheckpointChoiceSchema, PolicyServerBackendSchema, ServedPolicySchema, TrainedPolicySchema } from '../policy-server';
import { flagRepeatedInstances } from '../unique-instances';

/**
 * The evaluation section of the run config (docs/design.md "Retrieval evaluation"; CodeGrep §4.2, App. E; CodeScout
 * §4.2, App. G): the retrievers, sharding, file target and bootstrap.
 */

/** A retriever's name becomes a folder and a table row: letters, digits, ".", "_", "-". */
const retrieverName = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'use letters, digits, ".", "_" and "-" (max 64), starting with a letter or digit');
const topK = z.number().int().min(1, 'k must be at least 1');

/** CodeGrep App. E's BM25 baseline; `k` files are returned (App. E "Top-K selection": 2). */
export const Bm25RetrieverSchema = z.object({
  name: retrieverName,
  kind: z.literal('bm25'),
  k: topK.default(2),
  /** App. E "Test-directory scope": tests/ and test/ are indexed unless this is set. */
  excludeTests: z.boolean().default(false),
});

/** The dense embedding retriever (lib/retrievers/dense) over a sentence-transformers-style ONNX model folder. */
export const DenseRetrieverSchema = z.object({
  name: retrieverName,
  kind: z.literal('dense'),
  modelDir: z.string().min(1, 'dense: model dir required (a folder with model.onnx, tokenizer.json and the sentence-transformers configs)'),
  k: topK.default(2),
  excludeTests: z.boolean().default(false),
  /**
   * The BM25 prefilter: embed and rank only the files BM25 ranks in its top `bm25Candidates` for the instance (a
   * re-ranking over a bounded corpus, for a CPU run). Default: every file of the repository, as the papers' dense
   * baseline ranks it (CodeGrep §4.1); embeddings are cached by blob id, so each distinct file is embedded once.
   */
  bm25Candidates: z.number().int().min(1).optional(),
  /** Embed at most this many chunks of each file, from its start. Default: the whole file. */
  maxChunksPerFile: z.number().int().min(1).optional(),
});

/**
 * The agent retriever on any OpenAI-compatible endpoint serving the policy (or a checkpoint of it). With
 * `policy` the endpoint is codegrep's own policy server (lib/policy-server) for a checkpoint of a training
 * run: `trained` is this run's training stage, `{ run }` an earlier run's; `checkpoint` picks it (`best`,
 * `latest` or a step). The answer format and turn limit then come from the checkpoint's own training config
 * unless given here (an override, recorded in the report).
 */
export const AgentRetrieverSchema = z
  .object({
    name: retrieverName,
    kind: z.literal('agent'),
    baseUrl: z.url({ protocol: /^https?$/, error: 'baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1' }).optional(),
    model: z.string().trim().min(1, 'model must name the served model').optional(),
    /** Environment variable holding the API key (read by the worker; the key never enters workflow history). */
    apiKeyEnv: z.string().min(1).optional(),
    answerFormat: AnswerFormatSchema.optional(),
    limits: AgentLimitsSchema.optional(),
    /** Episodes of one shard run at once (shards themselves run `maxConcurrentShards` at a time). */
    concurrency: z.number().int().min(1).max(64).default(4),
    temperature: z.number().min(0).max(2).optional(),
    topP: z.number().gt(0).max(1).optional(),
    /** Per-call timeout of the endpoint (ms). */
    timeoutMs: z.number().int().min(100).default(120_000),
    /** A checkpoint of a training run, served by codegrep itself. */
    policy: TrainedPolicySchema.optional(),
    /** With `policy: trained`: which checkpoint (default `best` when the run validates, else `latest`). */
    checkpoint: CheckpointChoiceSchema.optional(),
    /** Set by the evaluation workflow once the policy is served: which checkpoint answers (every row records it). */
    served: ServedPolicySchema.optional(),
  })
  .superRefine((retriever, ctx) => {
    if (retriever.policy === undefined) {
      if (retriever.checkpoint !== undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['checkpoint'],
          message: 'checkpoint goes with policy: trained (or policy: { run, checkpoint })',
        });
      for (const key of ['baseUrl', 'model', 'answerFormat'] as const)
        if (retriever[key] === undefined)
          ctx.addIssue({
            code: 'custom',
            path: [key],
            message: `${key} is required (or set policy: trained to serve a training checkpoint)`,
          });
      return;
    }
    if (typeof retriever.policy === 'object' && retriever.policy.checkpoint !== undefined && retriever.checkpoint !== undefined)
      ctx.addIssue({ code: 'custom', path: ['checkpoint'], message: 'give the checkpoint once: in policy.checkpoint or in checkpoint' });
    if (retriever.served === undefined && (retriever.baseUrl !== undefined || retriever.model !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: [retriever.baseUrl !== undefined ? 'baseUrl' : 'model'],
        message: 'a trained policy is served by codegrep itself: leave baseUrl and model out',
      });
  });
export type AgentRetrieverConfig = z.infer<typeof AgentRetrieverSchema>;

/** Predictions of an outside system, JSONL (schemas/predictions.ts); `k` cuts every ranked list (Return@K). */
export const PredictionsRetrieverSchema = z.object({
  name: retrieverName,
  kind: z.literal('predictions'),
  path: z.string().min(1, 'predictions: path of the JSONL predictions file required'),
  k: topK.optional(),
});

export const RetrieverConfigSchema = z.discriminatedUnion('kind', [
  Bm25RetrieverSchema,
  DenseRetrieverSchema,
  AgentRetrieverSchema,
  PredictionsRetrieverSchema,
]);
export type RetrieverConfig = z.infer<typeof RetrieverConfigSchema>;
export type RetrieverKind = RetrieverConfig['kind'];
export const RetrieverKindSchema = z.enum(['bm25', 'dense', 'agent', 'predictions']);

/**
 * Which file set an instance's file-level scores compare against. `gold-patch`: the files the gold patch
 * changes (CodeGrep App. E "Scoring", CodeScout §4.2). `catm-merge`: the CATM target set
 * G(x) = Gpatch(x) ∪ retained CATM files (CodeGrep §4.2's internal evaluation set, §3.4); predicted line
 * ranges on CATM-only files are then dropped before line-range scoring (App. B, merge mode).
 */
export const FileTargetSchema = z.enum(['gold-patch', 'catm-merge']);
export type FileTarget = z.infer<typeof FileTargetSchema>;

/** Where and how trained-policy retrievers are served (lib/policy-server; the GPU worker's `servePolicy`). */
export const PolicyServerConfigSchema = z
  .object({
    backend: PolicyServerBackendSchema.default('auto'),
    /** The address the server binds and the evaluating workers reach it at. */
    host: z.string().min(1).default('127.0.0.1'),
    /** The serving node's Python (default: training.python, else .venv/bin/python). */
    python: z.string().min(1).optional(),
    /** The task queue of the node that serves (default: training.gpuTaskQueue, else the GPU task queue). */
    gpuTaskQueue: z.string().min(1).optional(),
    /** How long loading the model may take (ms). */
    readyTimeoutMs: z.number().int().min(1000).default(600_000),
  })
  .strict();
export type PolicyServerConfig = z.infer<typeof PolicyServerConfigSchema>;

export const EvaluationConfigSchema = z
  .object({
    policyServer: PolicyServerConfigSchema.prefault({}),
    /** Default: BM25 top-2, which needs nothing but the worktrees (the stage's offline mode). */
    retrievers: z
      .array(RetrieverConfigSchema)
      .min(1, 'name at least one retriever')
      .default([{ name: 'bm25', kind: 'bm25', k: 2, excludeTests: false }]),
    /** Instances per shard activity: the unit of parallelism and of resumption after a killed worker. */
    shardSize: z.number().int().min(1).max(10_000).default(25),
    /** Only these instance ids (default: every sample with ground truth). */
    instances: z.array(z.string().min(1)).min(1, 'instances: leave it out to evaluate every sample').optional(),
    fileTarget: FileTargetSchema.default('gold-patch'),
    bootstrap: z
      .object({
        samples: z.number().int().min(1).max(100_000).default(BOOTSTRAP_RESAMPLES),
        seed: z.number().int().min(0).default(BOOTSTRAP_SEED),
        confidence: z.number().gt(0).lt(1).default(BOOTSTRAP_CONFIDENCE),
      })
      .prefault({}),
    /** Shard activities in flight at once (the worker's own activity slots cap this too). */
    maxConcurrentShards: z.number().int().min(1).max(256).default(8),
    /**
     * Write this run's shards and report under `evaluation/<start time>/` instead of `evaluation/`, so every
     * execution predicts afresh and keeps its own report. Scheduled evaluations set it: the endpoint behind
     * an agent retriever may serve a newer checkpoint under the same model name, which no config hash sees.
     */
    outputPerRun: z.boolean().default(false),
    /** Filled in by validate-config from the run config's top-level `sandbox` (schemas/sandbox.ts); set that one. */
    sandbox: SandboxConfigSchema.optional(),
  })
  .superRefine((config, ctx) => {
    const seen = new Map<string, number>();
    config.retrievers.forEach((retriever, i) => {
      const first = seen.get(retriever.name);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['retrievers', i, 'name'],
          message: `"${retriever.name}" is already the name of retrievers[${first}]`,
        });
      } else seen.set(retriever.name, i);
    });
    if (config.instances) flagRepeatedInstances(config.instances, ctx);
  });
export type EvaluationConfig = z.infer<typeof EvaluationConfigSchema>;
export type EvaluationConfigInput = z.input<typeof EvaluationConfigSchema>;
