import type { DownstreamAgentConfig, DownstreamHarnessConfig } from '../../../schemas/downstream/config';
import type { DownstreamAgent } from '../agents/agent';
import { createBuiltinAgent } from '../agents/builtin-agent';
import type { Harness } from '../harness/harness';
import { createLocalHarness } from '../harness/local-harness';
import { createOpenHandsAdapter } from '../agents/openhands-adapter';
import type { RunWorktreeFactory } from './run-worktree';
import { createSweBenchHarness } from '../harness/swebench-adapter';

/** The environment a downstream run reads: the worker's, read once at start (activities/kit/deps.ts). */
export type RunEnv = Readonly<Record<string, string | undefined>>;

/**
 * The agent the `downstream.agent` section describes; the API key is read from `env` (the variable the config
 * names), never from config. An OpenHands command inherits `env`.
 */
export function agentFromConfig(config: DownstreamAgentConfig, env: RunEnv): DownstreamAgent {
  if (config.kind === 'builtin') {
    const apiKey = env[config.apiKeyEnv];
    return createBuiltinAgent({
      endpoint: { baseUrl: config.baseUrl, model: config.model, ...(apiKey ? { apiKey } : {}) },
      maxRounds: config.maxRounds,
      temperature: config.temperature,
      ...(config.maxTokensPerCall === undefined ? {} : { maxTokensPerCall: config.maxTokensPerCall }),
      retry: { maxAttempts: config.maxAttempts, timeoutMs: config.callTimeoutMs },
      sandbox: { isolation: config.sandbox?.isolation ?? 'namespace' },
      // The editor's writes run in the same sandbox as the terminal's programs, under the same switch.
      editor: { isolation: config.sandbox?.isolation ?? 'namespace' },
    });
  }
  return createOpenHandsAdapter({
    command: config.command,
    timeoutMs: config.timeoutMs,
    inheritedEnv: env,
    ...(config.outputFile ? { outputFile: config.outputFile } : {}),
    ...(config.env ? { env: config.env } : {}),
    ...(config.cwd ? { cwd: config.cwd } : {}),
  });
}

/**
 * The harness the `downstream.harness` section describes. The local harness checks patches out through
 * `worktrees`; the SWE-bench one writes its predictions and reports under `swebenchDir`, and its command inherits `env`.
 */
export function harnessFromConfig(
  config: DownstreamHarnessConfig,
  worktrees: RunWorktreeFactory,
  swebenchDir: string,
  env: RunEnv,
): Harness {
  if (config.kind === 'local') {
    return createLocalHarness({
      worktrees,
      interpreter: config.interpreter,
      testRunner: config.testRunner,
      timeoutMs: config.timeoutMs,
      ...(config.env ? { env: config.env } : {}),
    });
  }
  return createSweBenchHarness({
    command: config.command,
    workDir: swebenchDir,
    timeoutMs: config.timeoutMs,
    inheritedEnv: env,
    ...(config.modelName ? { modelName: config.modelName } : {}),
    ...(config.env ? { env: config.env } : {}),
  });
}
