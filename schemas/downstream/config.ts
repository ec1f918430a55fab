import { z } from 'zod';
import { PolicyServerConfigSchema } from '../evaluation/config';
import { CheckpointChoiceSchema, TrainedPolicySchema } from '../policy-server';
import { SandboxConfigSchema } from '../sandbox';
import { InjectionSourceSchema } from './injection';

/**
 * The `downstream` section of the run config (docs/design.md "Downstream injection"; CodeGrep §4.1, §4.3, §5.3, App. E;
 * CodeScout §6.1). Each configuration injects a retriever's files (or none, or the gold patch's) into the issue; a
 * frozen coding agent solves every (configuration, instance) pair in a fresh checkout; a harness judges the patch.
 */

/** A command line with `{placeholder}`s, as a string (split like a shell would, without one) or an argv array. */
const CommandTemplateSchema = z.union([
  z.string().trim().min(1, 'the command must not be empty'),
  z.array(z.string()).min(1, 'the command needs at least the program'),
]);

/** Extra environment variables for outside programs (names only from config, never secrets in history). */
const EnvSchema = z.record(
  z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'environment variable names are letters, digits and "_"'),
  z.string(),
);

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
    /**
     * `agent` only: the trained policy that finds the files, served by codegrep for the stage: `trained` is this
     * run's training (in a pipeline, the checkpoints its training stage wrote), `{ run, checkpoint }` an earlier
     * run's. It is asked with its own training config's answer format and turn limit.
     */
    policy: TrainedPolicySchema.optional(),
    /** `agent` only: which checkpoint (`best`, `latest` or a step; default `best` when the run validates, else `latest`). */
    checkpoint: CheckpointChoiceSchema.optional(),
    /** `agent` only: episodes of the policy at once (default as the evaluation's agent retriever: 4). */
    concurrency: z.number().int().min(1).max(64).optional(),
    /** `agent` only: per-call timeout of the served policy in ms (default as the evaluation's agent retriever). */
    timeoutMs: z.number().int().min(100).optional(),
  })
  .superRefine((configuration, ctx) => {
    if (configuration.source === 'agent') {
      if (configuration.policy === undefined)
        ctx.addIssue({
          code: 'custom',
          path: ['policy'],
          message: 'source "agent" needs policy: trained (this run\'s training) or policy: { run, checkpoint } (an earlier run)',
        });
      else if (
        typeof configuration.policy === 'object' &&
        configuration.policy.checkpoint !== undefined &&
        configuration.checkpoint !== undefined
      )
        ctx.addIssue({ code: 'custom', path: ['checkpoint'], message: 'give the checkpoint once: in policy.checkpoint or in checkpoint' });
    } else {
      for (const key of ['policy', 'checkpoint', 'concurrency', 'timeoutMs'] as const) {
        if (configuration[key] !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [key],
            message: `only a configuration with source "agent" takes ${key} (this one has source "${configuration.source}")`,
          });
        }
      }
    }
    if (configuration.source !== 'predictions') {
      for (const key of ['predictions', 'retriever'] as const) {
        if (configuration[key] !== undefined) {
          ctx.addIssue({
            code: 'custom',
            path: [key],
            message: `only a configuration with source "predictions" takes ${key} (this one has source "${configuration.source}")`,
          });
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
  /** Filled in by validate-config from the run config's top-level `sandbox` (schemas/sandbox.ts); set that one. */
  sandbox: SandboxConfigSchema.optional(),
});

export const OpenHandsAgentConfigSchema = z.object({
  kind: z.literal('openhands'),
  /**
   * The OpenHands command; placeholders {instance_id} {prompt_file} {instance_file} {workdir} {output_dir}
   * {repo} {base_commit} (lib/downstream/agents/openhands-adapter.ts).
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
  timeoutMs: z
    .number()
    .int()
    .min(1_000)
    .default(30 * 60_000),
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
    configurations: z
      .array(DownstreamConfigurationSchema)
      .min(1, 'list at least one configuration (e.g. { name: "baseline", source: "none" })'),
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
    runTimeoutMs: z
      .number()
      .int()
      .min(1_000)
      .default(2 * 60 * 60_000),
    /** Runs at the same time (each one an agent plus a checkout; the harness runs tests). */
    concurrency: z.number().int().min(1).max(256).default(2),
    /** Where `agent` configurations' policies are served (default: the evaluation section's `policyServer`). */
    policyServer: PolicyServerConfigSchema.optional(),
    /** Bootstrap seed and resamples of Table 3's intervals (lib/metrics' bootstrapCI). */
    bootstrap: z
      .object({
        resamples: z.number().int().min(100).default(1000),
        seed: z.number().int().default(0),
        confidence: z.number().gt(0).lt(1).default(0.95),
      })
      .default({ resamples: 1000, seed: 0, confidence: 0.95 }),
  })
  .superRefine((config, ctx) => {
    const seen = new Map<string, number>();
    config.configurations.forEach((configuration, index) => {
      const first = seen.get(configuration.name);
      if (first !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: ['configurations', index, 'name'],
          message: `configuration name "${configuration.name}" is used twice (also configurations.${first})`,
        });
      } else seen.set(configuration.name, index);
    });
    if (!seen.has(config.baseline)) {
      ctx.addIssue({
        code: 'custom',
        path: ['baseline'],
        message: `"${config.baseline}" is not one of the configurations (${[...seen.keys()].join(', ')})`,
      });
    }
    if (config.instances) {
      const duplicate = config.instances.find((id, i) => config.instances!.indexOf(id) !== i);
      if (duplicate) ctx.addIssue({ code: 'custom', path: ['instances'], message: `instance ${duplicate} is listed twice` });
    }
  });
export type DownstreamConfig = z.infer<typeof DownstreamConfigSchema>;
export type DownstreamConfigInput = z.input<typeof DownstreamConfigSchema>;
