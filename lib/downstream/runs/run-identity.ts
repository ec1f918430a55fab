import { createHash } from 'node:crypto';
import { canonicalJson, hashConfig } from '../../artifacts';
import type { DownstreamAgentConfig, DownstreamHarnessConfig } from '../../../schemas/downstream/config';
import type { InjectionConfiguration } from '../../../schemas/downstream/injection';
import type { DownstreamInstance } from '../../../schemas/downstream/instance';
import { DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION } from '../../../schemas/downstream/run-record';

/**
 * What decides a run's result, and so whether a finished record can be reused: the model and its sampling
 * settings, or the outside agent's command; the harness and its interpreter or command. Where the endpoint
 * lives, API keys, timeouts, retries and concurrency are left out: moving a vLLM server to another port must
 * not redo 500 runs.
 */
export function agentIdentity(agent: DownstreamAgentConfig): Record<string, unknown> {
  return agent.kind === 'builtin'
    ? {
        kind: agent.kind,
        model: agent.model,
        maxRounds: agent.maxRounds,
        temperature: agent.temperature,
        maxTokensPerCall: agent.maxTokensPerCall ?? null,
      }
    : { kind: agent.kind, command: agent.command, outputFile: agent.outputFile ?? null };
}

export function harnessIdentity(harness: DownstreamHarnessConfig): Record<string, unknown> {
  return harness.kind === 'local'
    ? { kind: harness.kind, interpreter: harness.interpreter, testRunner: harness.testRunner }
    : { kind: harness.kind, command: harness.command, modelName: harness.modelName ?? null };
}

/** The hash of one (configuration, instance) run: its record is reused while this stays the same. */
export function runHash(options: {
  configuration: InjectionConfiguration;
  predictedFiles: readonly string[] | null;
  /** The adapter sha256 of the trained policy that chose the files: the record names it, so another checkpoint's same files run again. */
  policyAdapterSha256?: string | null;
  instance: DownstreamInstance;
  agent: DownstreamAgentConfig;
  harness: DownstreamHarnessConfig;
}): string {
  const { configuration } = options;
  return hashConfig({
    record: DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
    configuration: { name: configuration.name, source: configuration.source, k: configuration.k ?? null },
    predictedFiles: options.predictedFiles,
    policy: options.policyAdapterSha256 ?? null,
    instance: createHash('sha256').update(canonicalJson(options.instance)).digest('hex'),
    agent: agentIdentity(options.agent),
    harness: harnessIdentity(options.harness),
  });
}

/** The agent in one line, for the plan and the report. */
export function describeAgent(agent: DownstreamAgentConfig): string {
  return agent.kind === 'builtin'
    ? `built-in agent, model ${agent.model} at ${agent.baseUrl}, temperature ${agent.temperature}, ≤ ${agent.maxRounds} rounds`
    : `OpenHands command ${JSON.stringify(agent.command)}`;
}

/** The harness in one line, for the plan and the report. */
export function describeHarness(harness: DownstreamHarnessConfig): string {
  if (harness.kind === 'swebench') return `SWE-bench harness command ${JSON.stringify(harness.command)}`;
  const runner = typeof harness.testRunner === 'string' ? harness.testRunner : `custom ${JSON.stringify(harness.testRunner.argv)}`;
  return `local harness, ${runner} with ${harness.interpreter}`;
}
