import { Bool, Field, Float64, Int32, List, Schema, Struct, Utf8 } from 'apache-arrow';
import { z } from 'zod';
import { BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED } from '../lib/metrics/params';
import { AgentLimitsSchema, AnswerFormatSchema } from './agent';
import { ArtifactRefSchema } from './artifact-ref';

/**
 * The retrieval-quality evaluation (SPEC §5 "Retrieval evaluation"; CodeGrep §4.2, Table 2; CodeScout §4.2,
 * Table 3, App. G): its config section, the activities' inputs and outputs, and the Arrow schemas of the
 * per-shard, predictions and per-instance metrics artifacts. Pure zod and apache-arrow (plus lib/metrics'
 * constants): safe to import from workflow code.
 */

// ---------------------------------------------------------------------------------------------------------
// Config

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
   * Embed only the files BM25 ranks in its top `bm25Candidates` for the instance (a re-ranking over a bounded
   * corpus: a CPU run of a real model over every file of a repository takes hours). Default: every file.
   */
  bm25Candidates: z.number().int().min(1).optional(),
  /** Embed at most this many chunks of each file, from its start. Default: the whole file. */
  maxChunksPerFile: z.number().int().min(1).optional(),
});

/** The agent retriever on any OpenAI-compatible endpoint serving the policy (or a checkpoint of it). */
export const AgentRetrieverSchema = z.object({
  name: retrieverName,
  kind: z.literal('agent'),
  baseUrl: z.url({ protocol: /^https?$/, error: 'baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1' }),
  model: z.string().trim().min(1, 'model must name the served model'),
  /** Environment variable holding the API key (read by the worker; the key never enters workflow history). */
  apiKeyEnv: z.string().min(1).optional(),
  answerFormat: AnswerFormatSchema,
  limits: AgentLimitsSchema.optional(),
  /** Episodes of one shard run at once (shards themselves run `maxConcurrentShards` at a time). */
  concurrency: z.number().int().min(1).max(64).default(4),
  temperature: z.number().min(0).max(2).optional(),
  topP: z.number().gt(0).max(1).optional(),
  /** Per-call timeout of the endpoint (ms). */
  timeoutMs: z.number().int().min(100).default(120_000),
});

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

/**
 * Which file set an instance's file-level scores compare against. `gold-patch`: the files the gold patch
 * changes (CodeGrep App. E "Scoring", CodeScout §4.2). `catm-merge`: the CATM target set
 * G(x) = Gpatch(x) ∪ retained CATM files (CodeGrep §4.2's internal evaluation set, §3.4); predicted line
 * ranges on CATM-only files are then dropped before line-range scoring (App. B, merge mode).
 */
export const FileTargetSchema = z.enum(['gold-patch', 'catm-merge']);
export type FileTarget = z.infer<typeof FileTargetSchema>;

export const EvaluationConfigSchema = z
  .object({
    /** Default: BM25 top-2, which needs nothing but the worktrees (the stage's offline mode). */
    retrievers: z.array(RetrieverConfigSchema).min(1, 'name at least one retriever').default([{ name: 'bm25', kind: 'bm25', k: 2, excludeTests: false }]),
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
  })
  .superRefine((config, ctx) => {
    const seen = new Map<string, number>();
    config.retrievers.forEach((retriever, i) => {
      const first = seen.get(retriever.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['retrievers', i, 'name'], message: `"${retriever.name}" is already the name of retrievers[${first}]` });
      } else seen.set(retriever.name, i);
    });
    if (config.instances) {
      const ids = new Set<string>();
      config.instances.forEach((id, i) => {
        if (ids.has(id)) ctx.addIssue({ code: 'custom', path: ['instances', i], message: `instance "${id}" is listed twice` });
        ids.add(id);
      });
    }
  });
export type EvaluationConfig = z.infer<typeof EvaluationConfigSchema>;
export type EvaluationConfigInput = z.input<typeof EvaluationConfigSchema>;

// ---------------------------------------------------------------------------------------------------------
// Activities

const stageBase = {
  runId: z.string(),
  runDir: z.string(),
};

export const PlanEvaluationInputSchema = z.object({
  ...stageBase,
  samples: ArtifactRefSchema,
  evaluation: EvaluationConfigSchema,
  /** Sub-folder of `evaluation/` for this execution (outputPerRun), or null for `evaluation/` itself. */
  outputLabel: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/).nullable(),
});
export type PlanEvaluationInput = z.input<typeof PlanEvaluationInputSchema>;

export const RetrieverPlanSchema = z.object({
  name: z.string(),
  kind: z.enum(['bm25', 'dense', 'agent', 'predictions']),
  /** Folder of this retriever's shards; its name carries the plan hash, so it holds only this plan's shards. */
  shardDir: z.string(),
  /** Hash of everything the retriever's predictions depend on (config, instances, inputs' bytes). */
  planHash: z.string(),
  /** Extra inputs of the cache key (the predictions file). */
  inputs: z.array(ArtifactRefSchema),
});
export type RetrieverPlan = z.infer<typeof RetrieverPlanSchema>;

export const EvaluationPlanSchema = z.object({
  /** Folder of this execution's artifacts: `<runDir>/evaluation` or `<runDir>/evaluation/<label>`. */
  outputDir: z.string(),
  instances: z.number().int(),
  shardCount: z.number().int(),
  excluded: z.object({
    /** Samples whose ground truth could not be derived (no worktree, unparseable patch). */
    withoutGroundTruth: z.number().int(),
    /** Samples left out by `evaluation.instances`. */
    notSelected: z.number().int(),
  }),
  retrievers: z.array(RetrieverPlanSchema),
});
export type EvaluationPlan = z.infer<typeof EvaluationPlanSchema>;

export const EvaluateShardInputSchema = z.object({
  ...stageBase,
  samples: ArtifactRefSchema,
  evaluation: EvaluationConfigSchema,
  retriever: RetrieverPlanSchema,
  shardIndex: z.number().int().min(0),
  shardCount: z.number().int().min(1),
});
export type EvaluateShardInput = z.input<typeof EvaluateShardInputSchema>;

export const EvaluateShardOutputSchema = z.object({
  retriever: z.string(),
  shardIndex: z.number().int(),
  shard: ArtifactRefSchema,
  cached: z.boolean(),
  instances: z.number().int(),
  failed: z.number().int(),
  ms: z.number(),
});
export type EvaluateShardOutput = z.infer<typeof EvaluateShardOutputSchema>;

export const SummarizeEvaluationInputSchema = z.object({
  ...stageBase,
  samples: ArtifactRefSchema,
  evaluation: EvaluationConfigSchema,
  plan: EvaluationPlanSchema,
  /** Finished shards, per retriever in config order; a retriever whose shards failed is in `failedRetrievers`. */
  shards: z.array(z.object({ retriever: z.string(), refs: z.array(ArtifactRefSchema) })),
  failedRetrievers: z.array(z.object({ name: z.string(), reason: z.string() })),
});
export type SummarizeEvaluationInput = z.input<typeof SummarizeEvaluationInputSchema>;

// ---------------------------------------------------------------------------------------------------------
// Summary (CodeGrep Table 2, CodeScout Table 3, Acc@k)

const nullableNumber = z.number().nullable();
export const IntervalSchema = z.object({ low: z.number(), high: z.number() });
/** A mean (or share, or median) with its percentile bootstrap interval; null values when n = 0. */
export const EstimateSchema = z.object({ value: nullableNumber, ci: IntervalSchema.nullable() });
export type Estimate = z.infer<typeof EstimateSchema>;

export const LevelSummarySchema = z.object({ f1: EstimateSchema, precision: EstimateSchema, recall: EstimateSchema });
export type LevelSummary = z.infer<typeof LevelSummarySchema>;

export const RetrieverSummarySchema = z.object({
  name: z.string(),
  kind: z.enum(['bm25', 'dense', 'agent', 'predictions']),
  /** Instances scored (failed ones included, scored as empty predictions). */
  instances: z.number().int(),
  /** Instances whose prediction failed (endpoint error, missing worktree, no line in the predictions file). */
  failed: z.number().int(),
  /** CodeGrep Table 2: Fβ mean and median, precision, recall, share with Fβ ≥ 0.8, mean turns. */
  table2: z.object({
    fBetaMean: EstimateSchema,
    fBetaMedian: EstimateSchema,
    precision: EstimateSchema,
    recall: EstimateSchema,
    shareHighQuality: EstimateSchema,
    /** Agentic retrievers only. */
    turns: nullableNumber,
  }),
  /** Mean line-range Fβ (CodeGrep App. B); null when the retriever gives no line ranges. */
  lineRangeFBeta: EstimateSchema.nullable(),
  /** CodeScout Table 3; module and function are null when the retriever does not predict that level. */
  table3: z.object({ file: LevelSummarySchema, module: LevelSummarySchema.nullable(), function: LevelSummarySchema.nullable() }),
  /** Acc@k over the ranked file list (CodeScout App. G); null for retrievers without a ranking. */
  accuracyAtK: z.array(z.object({ k: z.number().int(), value: EstimateSchema })).nullable(),
  /** Agentic retrievers: mean tool calls and tokens per instance. */
  agent: z.object({ toolCalls: nullableNumber, promptTokens: nullableNumber, completionTokens: nullableNumber, invalidAnswers: z.number().int() }).nullable(),
});
export type RetrieverSummary = z.infer<typeof RetrieverSummarySchema>;

export const EvaluationSummarySchema = z.object({
  runId: z.string(),
  instances: z.number().int(),
  excluded: EvaluationPlanSchema.shape.excluded,
  fileTarget: FileTargetSchema,
  beta: z.number(),
  highQualityThreshold: z.number(),
  bootstrap: z.object({ samples: z.number().int(), seed: z.number().int(), confidence: z.number() }),
  retrievers: z.array(RetrieverSummarySchema),
  failedRetrievers: z.array(z.object({ name: z.string(), reason: z.string() })),
});
export type EvaluationSummary = z.infer<typeof EvaluationSummarySchema>;

export const SummarizeEvaluationOutputSchema = z.object({
  predictions: ArtifactRefSchema,
  metrics: ArtifactRefSchema,
  summary: ArtifactRefSchema,
  report: z.object({ markdown: z.string(), html: z.string() }),
  summaryValues: EvaluationSummarySchema,
});
export type SummarizeEvaluationOutput = z.infer<typeof SummarizeEvaluationOutputSchema>;

export const EvaluationResultSchema = SummarizeEvaluationOutputSchema.extend({
  outputDir: z.string(),
  shards: z.object({ total: z.number().int(), cached: z.number().int(), computed: z.number().int(), failed: z.number().int() }),
});
export type EvaluationResult = z.infer<typeof EvaluationResultSchema>;

// ---------------------------------------------------------------------------------------------------------
// Rows

const lineRange = z.object({ path: z.string(), start: z.number().int(), end: z.number().int() });

/**
 * One instance's prediction by one retriever. `files` is the set scored; `ranked` the ranked file list Acc@k
 * reads (null for retrievers that do not rank). Lists a retriever does not produce are null, not empty, so a
 * level it never predicts is not scored as "predicted nothing". A failed prediction has `error` set and
 * empty lists: it is scored as predicting nothing.
 */
export const EvaluationPredictionSchema = z.object({
  instanceId: z.string().min(1),
  retriever: z.string().min(1),
  kind: z.enum(['bm25', 'dense', 'agent', 'predictions']),
  files: z.array(z.string()),
  ranked: z.array(z.string()).nullable(),
  lineRanges: z.array(lineRange).nullable(),
  modules: z.array(z.string()).nullable(),
  functions: z.array(z.string()).nullable(),
  turns: z.number().int().nullable(),
  toolCalls: z.number().int().nullable(),
  promptTokens: z.number().int().nullable(),
  completionTokens: z.number().int().nullable(),
  answerValid: z.boolean().nullable(),
  endReason: z.string().nullable(),
  error: z.string().nullable(),
  ms: z.number(),
});
export type EvaluationPrediction = z.infer<typeof EvaluationPredictionSchema>;

/** One instance's scores by one retriever (CodeGrep §4.2 / App. B; CodeScout §4.2; Acc@k CodeScout App. G). */
export const InstanceMetricsSchema = z.object({
  instanceId: z.string().min(1),
  retriever: z.string().min(1),
  kind: z.enum(['bm25', 'dense', 'agent', 'predictions']),
  goldFiles: z.number().int(),
  predictedFiles: z.number().int(),
  filePrecision: z.number(),
  fileRecall: z.number(),
  fileFBeta: z.number(),
  fileF1: z.number(),
  lineRangeFBeta: z.number().nullable(),
  modulePrecision: z.number().nullable(),
  moduleRecall: z.number().nullable(),
  moduleF1: z.number().nullable(),
  functionPrecision: z.number().nullable(),
  functionRecall: z.number().nullable(),
  functionF1: z.number().nullable(),
  accAt1: z.number().nullable(),
  accAt3: z.number().nullable(),
  accAt5: z.number().nullable(),
  turns: z.number().int().nullable(),
  toolCalls: z.number().int().nullable(),
  failed: z.boolean(),
});
export type InstanceMetrics = z.infer<typeof InstanceMetricsSchema>;

export const EVALUATION_SHARD_SCHEMA_NAME = 'evaluation.shard';
export const EVALUATION_PREDICTIONS_SCHEMA_NAME = 'evaluation.predictions';
export const EVALUATION_METRICS_SCHEMA_NAME = 'evaluation.metrics';
export const EVALUATION_SUMMARY_SCHEMA_NAME = 'evaluation.summary';
export const EVALUATION_SCHEMA_VERSION = 1;

const utf8List = () => new List(new Field('item', new Utf8(), false));
const rangeList = () =>
  new List(new Field('item', new Struct([new Field('path', new Utf8(), false), new Field('start', new Int32(), false), new Field('end', new Int32(), false)]), false));

const idFields = () => [new Field('instanceId', new Utf8(), false), new Field('retriever', new Utf8(), false), new Field('kind', new Utf8(), false)];

const predictionFields = () => [
  new Field('files', utf8List(), false),
  new Field('ranked', utf8List(), true),
  new Field('lineRanges', rangeList(), true),
  new Field('modules', utf8List(), true),
  new Field('functions', utf8List(), true),
  new Field('turns', new Int32(), true),
  new Field('toolCalls', new Int32(), true),
  new Field('promptTokens', new Int32(), true),
  new Field('completionTokens', new Int32(), true),
  new Field('answerValid', new Bool(), true),
  new Field('endReason', new Utf8(), true),
  new Field('error', new Utf8(), true),
  new Field('ms', new Float64(), false),
];

const scoreFields = () => [
  new Field('goldFiles', new Int32(), false),
  new Field('predictedFiles', new Int32(), false),
  new Field('filePrecision', new Float64(), false),
  new Field('fileRecall', new Float64(), false),
  new Field('fileFBeta', new Float64(), false),
  new Field('fileF1', new Float64(), false),
  new Field('lineRangeFBeta', new Float64(), true),
  new Field('modulePrecision', new Float64(), true),
  new Field('moduleRecall', new Float64(), true),
  new Field('moduleF1', new Float64(), true),
  new Field('functionPrecision', new Float64(), true),
  new Field('functionRecall', new Float64(), true),
  new Field('functionF1', new Float64(), true),
  new Field('accAt1', new Float64(), true),
  new Field('accAt3', new Float64(), true),
  new Field('accAt5', new Float64(), true),
];
const failedField = () => new Field('failed', new Bool(), false);

export const evaluationPredictionsArrowSchema = new Schema([...idFields(), ...predictionFields()]);
/** The metrics artifact repeats `turns` and `toolCalls` from the prediction (Table 2's Turns column). */
export const instanceMetricsArrowSchema = new Schema([
  ...idFields(),
  ...scoreFields(),
  new Field('turns', new Int32(), true),
  new Field('toolCalls', new Int32(), true),
  failedField(),
]);
/** A shard holds both: one row per (retriever, instance) with its prediction and its scores. */
export const evaluationShardArrowSchema = new Schema([...idFields(), ...predictionFields(), ...scoreFields(), failedField()]);

export const PREDICTION_COLUMNS = evaluationPredictionsArrowSchema.fields.map((f) => f.name);
export const METRIC_COLUMNS = instanceMetricsArrowSchema.fields.map((f) => f.name);
