import path from 'node:path';
import type { DownstreamConfig } from '../../schemas/downstream/config';

/**
 * The downstream section with its paths resolved against `baseDir` (the worker's working directory), as
 * validate-config does for every other path. Files are not checked here: a predictions file may be written
 * by an earlier stage of the same pipeline, so the plan activity checks them when the stage starts.
 */
export function resolveDownstreamPaths(downstream: DownstreamConfig, baseDir: string): DownstreamConfig {
  const resolve = (file: string) => path.resolve(baseDir, file);
  const harness =
    downstream.harness.kind === 'local' && downstream.harness.interpreter.includes('/')
      ? { ...downstream.harness, interpreter: resolve(downstream.harness.interpreter) }
      : downstream.harness;
  const agent =
    downstream.agent.kind === 'openhands' && downstream.agent.cwd
      ? { ...downstream.agent, cwd: resolve(downstream.agent.cwd) }
      : downstream.agent;
  return {
    ...downstream,
    ...(downstream.instancesFile ? { instancesFile: resolve(downstream.instancesFile) } : {}),
    configurations: downstream.configurations.map((c) => (c.predictions ? { ...c, predictions: resolve(c.predictions) } : c)),
    agent,
    harness,
  };
}
