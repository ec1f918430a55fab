import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { ConfigError } from '../schemas/config';

/**
 * Reads a run config (YAML or JSON). Relative input paths and dataDir are resolved against the config
 * file's folder so a config works from any current directory; the workflow gets absolute paths.
 */
export function readConfigFile(file: string): Record<string, unknown> {
  const absolute = path.resolve(file);
  if (!existsSync(absolute)) throw new ConfigError(`config file ${absolute} does not exist`);
  const text = readFileSync(absolute, 'utf8');
  let value: unknown;
  try {
    value = /\.json$/i.test(absolute) ? JSON.parse(text) : parseYaml(text);
  } catch (error) {
    throw new ConfigError(
      `config file ${absolute} is not valid ${/\.json$/i.test(absolute) ? 'JSON' : 'YAML'}: ${(error as Error).message}`,
    );
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new ConfigError(`config file ${absolute} must hold one object (mapping), not ${Array.isArray(value) ? 'a list' : typeof value}`);
  }
  const config = { ...(value as Record<string, unknown>) };
  const base = path.dirname(absolute);
  const inputs = config.inputs;
  if (typeof inputs === 'object' && inputs !== null && !Array.isArray(inputs)) {
    config.inputs = Object.fromEntries(
      Object.entries(inputs).map(([key, entry]) => [key, typeof entry === 'string' ? path.resolve(base, entry) : entry]),
    );
  }
  const environment = config.environment as
    { repoSource?: { kind?: unknown; dir?: unknown }; cacheDir?: unknown; worktreesDir?: unknown } | undefined;
  if (environment && typeof environment === 'object') {
    const resolved: Record<string, unknown> = { ...environment };
    if (environment.repoSource?.kind === 'mirror-dir' && typeof environment.repoSource.dir === 'string') {
      resolved.repoSource = { ...environment.repoSource, dir: path.resolve(base, environment.repoSource.dir) };
    }
    for (const key of ['cacheDir', 'worktreesDir'] as const) {
      if (typeof environment[key] === 'string') resolved[key] = path.resolve(base, environment[key] as string);
    }
    config.environment = resolved;
  }
  // Paths inside stage sections: evaluation retrievers' predictions files and model folders, downstream
  // configurations' predictions files, the training model folder.
  const resolveKeys = (entry: unknown, keys: string[]) => {
    if (typeof entry !== 'object' || entry === null) return entry;
    const copy: Record<string, unknown> = { ...(entry as Record<string, unknown>) };
    for (const key of keys) if (typeof copy[key] === 'string') copy[key] = path.resolve(base, copy[key] as string);
    return copy;
  };
  const evaluation = config.evaluation as { retrievers?: unknown[] } | undefined;
  if (evaluation && Array.isArray(evaluation.retrievers)) {
    config.evaluation = { ...evaluation, retrievers: evaluation.retrievers.map((r) => resolveKeys(r, ['path', 'modelDir'])) };
  }
  const downstreamSection = config.downstream as { configurations?: unknown[]; instancesFile?: unknown } | undefined;
  if (downstreamSection && typeof downstreamSection === 'object') {
    const resolved = resolveKeys(downstreamSection, ['instancesFile']) as Record<string, unknown>;
    if (Array.isArray(downstreamSection.configurations))
      resolved.configurations = downstreamSection.configurations.map((c) => resolveKeys(c, ['predictions']));
    config.downstream = resolved;
  }
  if (config.training && typeof config.training === 'object') config.training = resolveKeys(config.training, ['modelDir']);
  // An explicit dataDir is relative to the config file; the default `runs/` is relative to where you run.
  config.dataDir = typeof config.dataDir === 'string' ? path.resolve(base, config.dataDir) : path.resolve('runs');
  return config;
}
