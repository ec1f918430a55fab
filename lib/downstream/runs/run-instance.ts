import type { DownstreamInstance, DownstreamRunOutcomeRow, HarnessResult, InjectionConfiguration } from '../../../schemas/downstream';
import type { DownstreamAgent, DownstreamAgentResult } from '../agents/agent';
import type { Harness } from '../harness/harness';
import { promptForConfiguration, type Injection } from './inject';
import type { RunWorktreeFactory } from './run-worktree';

/**
 * One (configuration, instance) run end to end: the injected prompt, a fresh checkout for the agent, the
 * agent, the checkout removed, the harness on the agent's patch. Whatever the agent produced is judged,
 * also when it stopped on an endpoint failure or a limit (its `endReason` and `error` say so in the row).
 * Only a run that produced nothing to judge — the checkout could not be made, the agent or the harness threw
 * — is an `error` row. Never throws, except when `signal` cancels the run.
 */
export interface RunDownstreamInstanceOptions {
  configuration: InjectionConfiguration;
  instance: DownstreamInstance;
  /** The retriever's files for a `predictions` configuration, best first. */
  predictedFiles?: readonly string[];
  agent: DownstreamAgent;
  harness: Harness;
  worktrees: RunWorktreeFactory;
  signal?: AbortSignal;
}

export interface DownstreamInstanceRun {
  row: DownstreamRunOutcomeRow;
  injection: Injection | null;
  agent: DownstreamAgentResult | null;
  harness: HarnessResult | null;
}

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));

export async function runDownstreamInstance(options: RunDownstreamInstanceOptions): Promise<DownstreamInstanceRun> {
  const { configuration, instance, signal } = options;
  const failed = (stage: string, error: unknown, partial: Partial<DownstreamInstanceRun> = {}): DownstreamInstanceRun => {
    if (signal?.aborted) throw error;
    const agent = partial.agent ?? null;
    return {
      row: {
        configuration: configuration.name,
        instanceId: instance.instance_id,
        resolved: false,
        outcome: 'error',
        rounds: agent?.rounds ?? 0,
        inputTokens: agent?.inputTokens ?? 0,
        outputTokens: agent?.outputTokens ?? 0,
        patchBytes: agent ? Buffer.byteLength(agent.patch) : 0,
        endReason: agent?.endReason ?? 'agent_error',
        error: `${stage}: ${message(error)}`,
      },
      injection: partial.injection ?? null,
      agent,
      harness: null,
    };
  };

  let injection: Injection;
  try {
    injection = promptForConfiguration(instance, configuration, options.predictedFiles);
  } catch (error) {
    return failed('injection', error);
  }

  let agent: DownstreamAgentResult;
  try {
    const checkout = await options.worktrees.create(
      instance.repo,
      instance.base_commit,
      `agent-${configuration.name}-${instance.instance_id}`,
    );
    try {
      agent = await options.agent.run(instance, injection.prompt, {
        workdir: checkout.path,
        baseCommit: checkout.commit,
        scratch: checkout.scratch,
        ...(signal ? { signal } : {}),
      });
    } finally {
      await checkout.dispose().catch(() => undefined);
    }
  } catch (error) {
    return failed('agent', error, { injection });
  }

  let harness: HarnessResult;
  try {
    harness = await options.harness.evaluate(instance, agent.patch, signal ? { signal } : {});
  } catch (error) {
    return failed('harness', error, { injection, agent });
  }

  return {
    row: {
      configuration: configuration.name,
      instanceId: instance.instance_id,
      resolved: harness.resolved,
      outcome: harness.outcome,
      rounds: agent.rounds,
      inputTokens: agent.inputTokens,
      outputTokens: agent.outputTokens,
      patchBytes: Buffer.byteLength(agent.patch),
      endReason: agent.endReason,
      error:
        agent.error ?? (harness.outcome === 'error' ? (harness.log.split('\n').filter(Boolean).slice(-1)[0] ?? 'harness error') : null),
    },
    injection,
    agent,
    harness,
  };
}
