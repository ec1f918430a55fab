import { z } from 'zod';
import { DownstreamConfigSchema } from './downstream/config';
import { EvaluationConfigSchema } from './evaluation';
import { SandboxConfigSchema } from './sandbox';
import { StoreUriSchema } from './store';
import { DEFAULT_REPO_SOURCE, RepoSourceSchema } from './worktrees';
import { TrainingConfigSchema } from './training/config';
import { RftConfigSchema } from './rft';

/**
 * The one JSON object a `pipeline` (or `catm`) workflow takes, so
 * `temporal workflow start --type pipeline --task-queue codegrep --input-file cfg.json` works.
 * Paths are resolved by the activities relative to the worker's working directory (the project root when
 * started with `npm run worker`); `codegrep run` turns them into absolute paths before starting.
 */

const safeId = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, 'use letters, digits, ".", "_" and "-" (max 100), starting with a letter or digit');

export const JudgeConfigSchema = z
  .object({
    /** `llm`: ask an OpenAI-compatible endpoint; `none`: keep every candidate, verdict `skipped` (offline mode). */
    mode: z.enum(['llm', 'none']).default('none'),
    baseUrl: z.string().url().optional(),
    model: z.string().min(1).optional(),
    /** Name of the environment variable that holds the API key (the key itself never enters workflow history). */
    apiKeyEnv: z.string().default('CODEGREP_LLM_API_KEY'),
    concurrency: z.number().int().min(1).max(256).default(16),
    timeoutMs: z.number().int().min(100).default(60_000),
    maxAttempts: z.number().int().min(1).max(20).default(6),
  })
  .superRefine((judge, ctx) => {
    if (judge.mode === 'llm') {
      if (!judge.baseUrl) ctx.addIssue({ code: 'custom', path: ['baseUrl'], message: 'required when judge.mode is "llm"' });
      if (!judge.model) ctx.addIssue({ code: 'custom', path: ['model'], message: 'required when judge.mode is "llm"' });
    }
  });
export type JudgeConfig = z.infer<typeof JudgeConfigSchema>;

export const EnvironmentConfigSchema = z.object({
  /**
   * Where repositories come from: `{ kind: url, template: 'https://github.com/{repo}.git' }` (default) or
   * `{ kind: mirror-dir, dir }` with local bare mirrors `<dir>/<owner>__<name>.git`, for offline use.
   */
  repoSource: RepoSourceSchema.default(DEFAULT_REPO_SOURCE),
  /** Bare clones (one per repo); default `<dataDir>/repos`, shared by runs. */
  cacheDir: z.string().min(1).optional(),
  /** Worktrees (one per commit); default `<dataDir>/worktrees`, shared by runs. */
  worktreesDir: z.string().min(1).optional(),
  concurrencyAcrossRepos: z.number().int().min(1).max(64).default(4),
  /**
   * What a sample whose (repo, commit) cannot be materialized does to the stage: `fail` (default) fails the
   * stage, all or nothing; `skip` drops those samples with their reason (environment/dropped.parquet) and the
   * later stages run on the rest. With no usable sample left the stage fails either way.
   */
  onUnavailable: z.enum(['skip', 'fail']).default('fail'),
  /**
   * A disk budget for the checkouts in `worktreesDir` (bytes): after each worktree it makes, the stage removes
   * the least recently used worktrees that no activity holds until the rest fit (lib/worktrees/budget.ts).
   * Unset: no budget.
   */
  maxWorktreeBytes: z.number().int().positive().optional(),
  /**
   * Whether each commit gets a checkout: with `auto` (default) a run whose stages end in an evaluation of BM25
   * and dense retrievers only (no training, downstream or agent retriever) makes none, since BM25 and dense read
   * the commit from the bare repository; every other run makes them. `always` makes them whatever the stages.
   */
  worktrees: z.enum(['auto', 'always']).default('auto'),
});
export type EnvironmentConfig = z.infer<typeof EnvironmentConfigSchema>;

export const CatmConfigSchema = z.object({
  runId: safeId,
  /** Where run artifacts go: `<dataDir>/<runId>/...`. */
  dataDir: z.string().min(1).default('runs'),
  recipe: z.string().min(1).default('codegrep-v3'),
  inputs: z.object({
    /** Trajectory rows, JSONL or Parquet (layout in data/README.md). */
    trajectories: z.string().min(1),
    /** SWE-bench-style instances (instance_id, repo, base_commit, problem_statement, patch), JSONL or Parquet. */
    instances: z.string().min(1),
  }),
  /** Activity timeout overrides (ms), filled in by `codegrep run` from temporal.config.ts and its env vars. */
  temporal: z
    .object({
      activityTimeouts: z
        .record(
          z.string(),
          z.object({ startToCloseMs: z.number().int().positive().optional(), heartbeatMs: z.number().int().positive().optional() }),
        )
        .default({}),
    })
    .default({ activityTimeouts: {} }),
  judge: JudgeConfigSchema.default({ mode: 'none', apiKeyEnv: 'CODEGREP_LLM_API_KEY', concurrency: 16, timeoutMs: 60_000, maxAttempts: 6 }),
});
export type CatmConfig = z.infer<typeof CatmConfigSchema>;

export const PipelineStageSchema = z.enum(['catm', 'environment', 'evaluation', 'downstream', 'training', 'rft']);
export type PipelineStage = z.infer<typeof PipelineStageSchema>;

export const PipelineConfigSchema = CatmConfigSchema.extend({
  stages: z.array(PipelineStageSchema).min(1).default(['catm']),
  environment: EnvironmentConfigSchema.default({
    repoSource: DEFAULT_REPO_SOURCE,
    concurrencyAcrossRepos: 4,
    onUnavailable: 'fail',
    worktrees: 'auto',
  }),
  /** Retrieval-quality evaluation (schemas/evaluation.ts); default: BM25 top-2 only. */
  evaluation: EvaluationConfigSchema.prefault({}),
  /** Downstream injection evaluation (CodeGrep §4.3, Table 3); required when stages include "downstream". */
  downstream: DownstreamConfigSchema.optional(),
  /** GRPO training on the GPU worker (schemas/training/config.ts); required by the training workflow. */
  training: TrainingConfigSchema.optional(),
  /** Warm start of training by rejection-sampling fine-tuning (schemas/rft.ts; CodeScout §4.1); stage `rft`. */
  rft: RftConfigSchema.optional(),
  // the run's artifact store (README "Deployment: several machines")
  /**
   * The artifact store the run's machines share (`s3://bucket/prefix` or `file:///dir`; objects under
   * `<store>/<runId>/`). Set, the GPU segment works in its own node-local data dir (CODEGREP_DATA_DIR) and gets
   * the samples, checkpoints and logs through the store. Unset: every node sees `dataDir` (as before).
   */
  store: StoreUriSchema.optional(),
  /**
   * How the agent's tools are isolated wherever they run (evaluation's agent retrievers, the training
   * environment, the built-in downstream agent): `{ isolation: "namespace" }` (default) or "filter-only"
   * (schemas/sandbox.ts; README, Security). validate-config copies it into those sections.
   */
  sandbox: SandboxConfigSchema.prefault({}),
});
export type PipelineConfig = z.infer<typeof PipelineConfigSchema>;
export type PipelineConfigInput = z.input<typeof PipelineConfigSchema>;

/** Formats zod issues as `field.path: what is wrong` lines, naming the source (file) of the config. */
export function describeConfigIssues(source: string, error: z.ZodError): string {
  const lines = error.issues.map((issue) => {
    const where = issue.path.length > 0 ? issue.path.join('.') : '(top level)';
    return `  ${where}: ${issue.message}`;
  });
  return `invalid config ${source}:\n${lines.join('\n')}`;
}

export function parsePipelineConfig(source: string, value: unknown): PipelineConfig {
  const parsed = PipelineConfigSchema.safeParse(value);
  if (!parsed.success) throw new ConfigError(describeConfigIssues(source, parsed.error));
  return parsed.data;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}
