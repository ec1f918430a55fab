import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ConfigError, PipelineConfigSchema, describeConfigIssues, type PipelineConfig } from '../../schemas/config';
import type { DownstreamConfig } from '../../schemas/downstream/config';
import type { SandboxConfig } from '../../schemas/sandbox';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { resolveDownstreamPaths } from './downstream-paths';
import { resolveEvaluationPaths } from './evaluation-paths';
import { resolveTrainingPaths } from './training-paths';
import { resolveRftConfig } from './rft-config';

export type ResolvedConfig = Omit<PipelineConfig, 'environment' | 'training'> & {
  runDir: string;
  environment: PipelineConfig['environment'] & { cacheDir: string; worktreesDir: string };
  training?: ResolvedTrainingConfig;
};

function withSandbox(downstream: DownstreamConfig, sandbox: SandboxConfig): DownstreamConfig {
  return downstream.agent.kind === 'builtin' ? { ...downstream, agent: { ...downstream.agent, sandbox } } : downstream;
}

/**
 * The run config validated with zod (defaults applied) and every path resolved against `baseDir` (the worker's
 * working directory, or the config file's folder for the CLI). Throws `ConfigError` naming each bad field.
 */
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
  // The one `sandbox` setting reaches every section whose activities run agent tools.
  const { sandbox } = config;
  const downstream = config.downstream ? { downstream: withSandbox(resolveDownstreamPaths(config.downstream, baseDir), sandbox) } : {};
  const evaluation = { ...resolveEvaluationPaths(config.evaluation, baseDir, source), sandbox };
  const training = config.training ? resolveTrainingPaths(config.training, baseDir, sandbox) : undefined;
  const rft = resolveRftConfig(config, baseDir, source);
  return {
    ...config,
    dataDir,
    inputs,
    environment,
    evaluation,
    ...downstream,
    training,
    ...(rft ? { rft } : {}),
    runDir: path.join(dataDir, config.runId),
  };
}
