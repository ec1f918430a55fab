import { z } from 'zod';
import { ArtifactRefSchema } from './artifact-ref';
import {
  DownstreamInstanceSchema,
  DownstreamRunRowSchema,
  DownstreamTableSchema,
  HarnessOutcomeSchema,
  InjectionSourceSchema,
  TestStatusSchema,
} from './downstream';
import { RepoSourceSchema } from './worktrees';

/**
 * The `downstream` section of the run config and the downstream stage's activity inputs/outputs (SPEC §5
 * "Downstream injection"; CodeGrep §4.1, §4.3, §5.3, App. E; CodeScout §6.1). Each configuration injects a
 * retriever's files (or none, or the gold patch's) into the issue; a frozen coding agent solves every
 * (configuration, instance) pair in a fresh checkout; a harness judges the patch; Table 3 is computed from the
 * run rows. Pure zod: safe to import from workflow code (types only there).
 */

// ---------------------------------------------------------------------------------------------------------
// Config

/** A command line with `{placeholder}`s, as a string (split like a shell would, without one) or an argv array. */
const CommandTemplateSchema = z.union([z.string().trim().min(1, 'the command must not be empty'), z.array(z.string()).min(1, 'the command needs at least the program')]);

/** Extra environment variables for outside programs (names only from config, never secrets in history). */
const EnvSchema = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and "_"'), z.string());

export const DownstreamConfigurationSchema = z
  .object({
    /** The row label of Table 3 (e.g. "baseline", "bm25-top2", "codegrep-v3"). */
    name: z
      .string()
      .trim()
      .min(1, 'a configuration needs a name (the row label of Table 3)')
      .max(100, 'a configuration name is at most 100 characters'),
    source: InjectionSourceSchema,
    /**
     * `predictions` only: a predictions file, either the evaluation stage's predictions Parquet (columns
     * `instanceId`, `files`, and `retriever` when it holds several retrievers) or a JSONL file of any outside
     * system (`instance_id`, `found_files`, best first; schemas/predictions.ts). May be left out when the
     * workflow input carries `artifacts.predictions[<name>]` (the pipeline passes the evaluation stage's ref).
     */
    predictions: z.string().trim().min(1).optional(),
    /**
     * `predictions` only: keep the rows of this retriever of a multi-retriever Parquet file (the evaluation
     * stage's holds all of them). Default: the retriever named like the configuration, if there is one.
     */
    retriever: z.string().trim().min(1).optional(),
    /** Inject only the first k files (absent: all of them; App. E's K = 2 is applied by BM25 itself). */
    k: z.number().int().min(1, 'k must be at least 1 (leave it out to inject every file)').optional(),
  })
  .superRefine((configuration, ctx) => {
    if (configuration.source !== 'predictions') {
      for (const key of ['predictions', 'retriever'] as const) {
        if (configuration[key] !== undefined) {
          ctx.addIssue({ code: 'custom', path: [key], message: `only a configuration with source "predictions" takes ${key} (this one has source "${configuration.source}")` });
        }
      }
    }
  });
export type DownstreamConfiguration = z.infer<typeof DownstreamConfigurationSchema>;

export const BuiltinAgentConfigSchema = z.object({
  kind: z.literal('builtin'),
  /** Any OpenAI-compatible Chat Completions server (vLLM, SGLang, OpenAI), e.g. http://127.0.0.1:8000/v1. */
  baseUrl: z.url({ protocol: /^https?$/, error: 'baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1' }),
  model: z.string().trim().min(1, 'model must name the served model'),
  /** Name of the environment variable holding the API key (the key never enters workflow history). */
  apiKeyEnv: z.string().min(1).default('CODEGREP_LLM_API_KEY'),
  /** CodeGrep §4.1: 100 rounds. */
  maxRounds: z.number().int().min(1).default(100),
  /** CodeGrep §4.1: temperature 0. */
  temperature: z.number().min(0).max(2).default(0),
  maxTokensPerCall: z.number().int().min(1).optional(),
  /** Limit of one model call (a long reasoning reply at 100 rounds needs minutes). */
  callTimeoutMs: z.number().int().min(100).default(600_000),
  /** Attempts per model call (retries on 429/5xx/timeouts, none on 4xx). */
  maxAttempts: z.number().int().min(1).max(20).default(6),
});

export const OpenHandsAgentConfigSchema = z.object({
  kind: z.literal('openhands'),
  /**
   * The OpenHands command; placeholders {instance_id} {prompt_file} {instance_file} {workdir} {output_dir}
   * {repo} {base_commit} (lib/downstream/openhands-adapter.ts).
   */
  command: CommandTemplateSchema,
  timeoutMs: z.number().int().min(1_000),
  /** Output file inside {output_dir} (may use {instance_id}); default output.jsonl. */
  outputFile: z.string().min(1).optional(),
  env: EnvSchema.optional(),
  /** Working directory of the command (e.g. an OpenHands checkout). */
  cwd: z.string().min(1).optional(),
});

export const DownstreamAgentConfigSchema = z.discriminatedUnion('kind', [BuiltinAgentConfigSchema, OpenHandsAgentConfigSchema], {
  error: 'agent.kind must be "builtin" (an OpenAI-compatible endpoint) or "openhands" (an outside command)',
});
export type DownstreamAgentConfig = z.infer<typeof DownstreamAgentConfigSchema>;

export const TestRunnerSchema = z.union([z.literal('pytest'), z.literal('django'), z.object({ argv: CommandTemplateSchema }).strict()], {
  error: 'testRunner must be "pytest", "django" or { argv: "<command with {interpreter} and {test}>" }',
});

export const LocalHarnessConfigSchema = z.object({
  kind: z.literal('local'),
  /** A program on PATH (`python3`) or a path (`.venv/bin/python`, resolved against the worker's directory). */
  interpreter: z.string().trim().min(1).default('python3'),
  testRunner: TestRunnerSchema.default('pytest'),
  /** Limit of the whole test phase of one evaluation. */
  timeoutMs: z.number().int().min(1_000).default(30 * 60_000),
  env: EnvSchema.optional(),
});

export const SweBenchHarnessConfigSchema = z.object({
  kind: z.literal('swebench'),
  /** SWE-bench's run_evaluation command; placeholders {predictions_path} (required) {run_id} {model_name} {output_dir}. */
  command: CommandTemplateSchema,
  timeoutMs: z.number().int().min(1_000),
  modelName: z.string().min(1).optional(),
  env: EnvSchema.optional(),
});

export const DownstreamHarnessConfigSchema = z.discriminatedUnion('kind', [LocalHarnessConfigSchema, SweBenchHarnessConfigSchema], {
  error: 'harness.kind must be "local" (tests with a configured interpreter) or "swebench" (the SWE-bench Docker harness command)',
});
export type DownstreamHarnessConfig = z.infer<typeof DownstreamHarnessConfigSchema>;

export const DownstreamConfigSchema = z
  .object({
    configurations: z.array(DownstreamConfigurationSchema).min(1, 'list at least one configuration (e.g. { name: "baseline", source: "none" })'),
    /** The configuration every other one is compared with (Table 3's "Baseline"). */
    baseline: z.string().trim().min(1),
    agent: DownstreamAgentConfigSchema,
    harness: DownstreamHarnessConfigSchema,
    /**
     * The SWE-bench-style instances the agent solves: JSONL or Parquet with instance_id, repo, base_commit,
     * problem_statement, patch and, for the local harness, FAIL_TO_PASS / PASS_TO_PASS / test_patch.
     * Default: `inputs.instances`.
     */
    instancesFile: z.string().trim().min(1).optional(),
    /** Run only these instance ids (default: every valid instance of the file). */
    instances: z.array(z.string().trim().min(1)).min(1, 'instances, when given, must name at least one instance id').optional(),
    /** Wall-clock limit of one (configuration, instance) run, agent and harness together; past it the run is an error row. */
    runTimeoutMs: z.number().int().min(1_000).default(2 * 60 * 60_000),
    /** Runs at the same time (each one an agent plus a checkout; the harness runs tests). */
    concurrency: z.number().int().min(1).max(256).default(2),
    /** Bootstrap seed and resamples of Table 3's intervals (lib/metrics' bootstrapCI). */
    bootstrap: z
      .object({ resamples: z.number().int().min(100).default(1000), seed: z.number().int().default(0), confidence: z.number().gt(0).lt(1).default(0.95) })
      .default({ resamples: 1000, seed: 0, confidence: 0.95 }),
  })
  .superRefine((config, ctx) => {
    const seen = new Map<string, number>();
    config.configurations.forEach((configuration, index) => {
      const first = seen.get(configuration.name);
      if (first !== undefined) {
        ctx.addIssue({ code: 'custom', path: ['configurations', index, 'name'], message: `configuration name "${configuration.name}" is used twice (also configurations.${first})` });
      } else seen.set(configuration.name, index);
    });
    if (!seen.has(config.baseline)) {
      ctx.addIssue({ code: 'custom', path: ['baseline'], message: `"${config.baseline}" is not one of the configurations (${[...seen.keys()].join(', ')})` });
    }
    if (config.instances) {
      const duplicate = config.instances.find((id, i) => config.instances!.indexOf(id) !== i);
      if (duplicate) ctx.addIssue({ code: 'custom', path: ['instances'], message: `instance ${duplicate} is listed twice` });
    }
  });
export type DownstreamConfig = z.infer<typeof DownstreamConfigSchema>;
export type DownstreamConfigInput = z.input<typeof DownstreamConfigSchema>;

// ---------------------------------------------------------------------------------------------------------
// Predictions rows of the evaluation stage (Parquet)

/**
 * What the downstream stage reads from a predictions Parquet file: the instance and its ranked files. The
 * evaluation stage writes `agent.predictions` rows (schemas/agent.ts: instanceId, retriever, files, …);
 * LocAgent-style column names (instance_id, found_files) are accepted too. Other columns are ignored.
 */
export const PredictionsParquetRowSchema = z
  .object({
    instanceId: z.string().min(1).optional(),
    instance_id: z.string().min(1).optional(),
    retriever: z.string().nullish(),
    files: z.array(z.string()).nullish(),
    found_files: z.array(z.string()).nullish(),
  })
  .transform((row, ctx) => {
    const instanceId = row.instanceId ?? row.instance_id;
    const files = row.files ?? row.found_files;
    if (instanceId === undefined) ctx.addIssue({ code: 'custom', message: 'has no instanceId (or instance_id) column value' });
    if (files === undefined || files === null) ctx.addIssue({ code: 'custom', message: 'has no files (or found_files) list' });
    return { instanceId: instanceId ?? '', retriever: row.retriever ?? null, files: files ?? [] };
  });

// ---------------------------------------------------------------------------------------------------------
// Plan (JSON artifact): what the stage will run, written once per (config, inputs)

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
  /** Config hash of this run: what makes a finished record reusable (see activities/downstream-plan.ts). */
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

// ---------------------------------------------------------------------------------------------------------
// Run record (JSON artifact per (configuration, instance)): the durable truth a retry or a rerun reuses

export const DOWNSTREAM_RUN_RECORD_SCHEMA_NAME = 'downstream.run-record';
export const DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION = 1;

/** One agent action, for action-level case studies (CodeGrep App. F, Table 8). */
export const DownstreamActionSchema = z.object({
  round: z.number().int().positive(),
  tool: z.string(),
  /** The editor command, or the terminal command line (cut to 200 characters). */
  command: z.string().nullable(),
  path: z.string().nullable(),
});
export type DownstreamAction = z.infer<typeof DownstreamActionSchema>;

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

// ---------------------------------------------------------------------------------------------------------
// Activity inputs / outputs

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

export const DOWNSTREAM_TABLE_SCHEMA_NAME = 'downstream.table';
export const DOWNSTREAM_TABLE_SCHEMA_VERSION = 1;

export const OutcomeCountsSchema = z.record(z.string(), z.number().int());

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
