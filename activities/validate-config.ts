import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/activity';
import { ConfigError, PipelineConfigSchema, describeConfigIssues, type PipelineConfig } from '../schemas/config';
import { resolveDownstreamPaths } from './downstream-config';
import { resolveEvaluationPaths } from './evaluation-config';
import type { ResolvedTrainingConfig } from '../schemas/training/config';
import { resolveTrainingPaths } from '../lib/training';

export type ResolvedConfig = Omit<PipelineConfig, 'environment' | 'training'> & {
  runDir: string;
  environment: PipelineConfig['environment'] & { cacheDir: string; worktreesDir: string };
  training?: ResolvedTrainingConfig;
};

/**
 * Validates the run config with zod (defaults applied) and resolves every path against the worker's working
 * directory. Runs as the first activity of every workflow so `temporal workflow start --input-file` gets the
 * same checks as `codegrep run`; a bad config fails at once (non-retryable) naming each bad field.
 */
export async function validateConfig(input: unknown): Promise<ResolvedConfig> {
  try {
    return resolveConfig(input, 'workflow input');
  } catch (error) {
    if (error instanceof ConfigError) {
      throw ApplicationFailure.create({ type: 'ConfigError', message: error.message, nonRetryable: true });
    }
    throw error;
  }
}

export function resolveConfig(input: unknown, source: string, baseDir = process.cwd()): ResolvedConfig {
  const parsed = PipelineConfigSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(describeConfigIssues(source, parsed.error));
  const config = parsed.data;
  const inputs = {
    trajectories: path.resolve(baseDir, config.inputs.trajectories),
    instances: path.resolve(baseDir, config.inputs.instances),
  };
  for (const [key, file] of Object.entries(inputs)) {
    if (!existsSync(file)) throw new ConfigError(`invalid config ${source}:\n  inputs.${key}: file ${file} does not exist`);
    if (!statSync(file).isFile()) throw new ConfigError(`invalid config ${source}:\n  inputs.${key}: ${file} is not a file`);
  }
  const dataDir = path.resolve(baseDir, config.dataDir);
  const repoSource =
    config.environment.repoSource.kind === 'mirror-dir'
      ? { ...config.environment.repoSource, dir: path.resolve(baseDir, config.environment.repoSource.dir) }
      : config.environment.repoSource;
  const environment = {
    ...config.environment,
    repoSource,
    cacheDir: path.resolve(baseDir, config.environment.cacheDir ?? path.join(dataDir, 'repos')),
    worktreesDir: path.resolve(baseDir, config.environment.worktreesDir ?? path.join(dataDir, 'worktrees')),
  };
  const downstream = config.downstream ? { downstream: resolveDownstreamPaths(config.downstream, baseDir) } : {};
  const evaluation = resolveEvaluationPaths(config.evaluation, baseDir, source);
  const training = config.training ? resolveTrainingPaths(config.training, baseDir) : undefined;
  return { ...config, dataDir, inputs, environment, evaluation, ...downstream, training, runDir: path.join(dataDir, config.runId) };
}
