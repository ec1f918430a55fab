import { promises as fs } from 'node:fs';
import path from 'node:path';
import { followAbort } from '../../llm/abort';
import type { ChatMessage } from '../../../schemas/agent';
import type { DownstreamAgentConfig, DownstreamHarnessConfig } from '../../../schemas/downstream/config';
import type { DownstreamPlan, PlannedConfiguration, PlannedPair } from '../../../schemas/downstream/plan';
import type { DownstreamAction, DownstreamRunRecord } from '../../../schemas/downstream/run-record';
import type { DownstreamRunOutcomeRow, DownstreamRunPolicyColumns } from '../../../schemas/downstream/runs';
import type { RepoSource } from '../../../schemas/worktrees';
import { agentFromConfig, harnessFromConfig, type RunEnv } from './from-config';
import { checkoutDirFor, downstreamPaths, trajectoryPathFor } from '../layout';
import { runDownstreamInstance, type DownstreamInstanceRun } from './run-instance';
import { gitRunWorktrees } from './run-worktree';

const HARNESS_LOG_TAIL = 20_000;

export interface RunPlannedPairOptions {
  plan: DownstreamPlan;
  pair: PlannedPair;
  runDir: string;
  agent: DownstreamAgentConfig;
  harness: DownstreamHarnessConfig;
  checkouts: { repoSource: RepoSource; cacheDir: string };
  /** Wall-clock limit of the agent and the harness together; past it the pair is an `error` row, not a failure. */
  runTimeoutMs: number;
  /** Cancellation of the stage: kills the agent and harness processes, and the run throws. */
  signal: AbortSignal;
  /** Temporal attempt, kept in the record. */
  attempt: number;
  /** The worker's environment (activities/kit/deps.ts): the agent's API key, the agent's and harness's processes. */
  env: RunEnv;
}

/** A finished run: its record, and the conversation to store beside it (empty when the agent gave none). */
export interface PlannedPairRun {
  record: DownstreamRunRecord;
  trajectory: ChatMessage[];
}

/**
 * One planned (configuration, instance) run (CodeGrep §4.3): the injected prompt, the frozen agent in a fresh
 * checkout, the harness on its patch (runDownstreamInstance), under the run's own deadline. Throws only when
 * `signal` cancels the run.
 */
export async function runPlannedPair(options: RunPlannedPairOptions): Promise<PlannedPairRun> {
  const { plan, pair, runDir, signal } = options;
  const configuration = plan.configurations.find((c) => c.name === pair.configuration)!;
  const instance = plan.instances.find((i) => i.instance_id === pair.instanceId)!;
  const run = new AbortController();
  const unlink = followAbort(signal, run);
  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    run.abort(new Error(`run passed ${options.runTimeoutMs} ms`));
  }, options.runTimeoutMs);
  deadline.unref();

  // The pair's own checkout folder: whatever is there was left by an attempt that died (a killed worker never
  // disposed its checkouts), so it goes; its git registrations are pruned by the next checkout's removal.
  const checkoutDir = checkoutDirFor(runDir, pair.configuration, pair.instanceId);
  await fs.rm(checkoutDir, { recursive: true, force: true });
  const started = Date.now();
  const worktrees = gitRunWorktrees({ cacheDir: options.checkouts.cacheDir, runDir: checkoutDir, source: options.checkouts.repoSource });
  let result: DownstreamInstanceRun | null = null;
  let row: DownstreamRunOutcomeRow;
  try {
    result = await runDownstreamInstance({
      configuration: { name: configuration.name, source: configuration.source, ...(configuration.k ? { k: configuration.k } : {}) },
      instance,
      ...(pair.predictedFiles ? { predictedFiles: pair.predictedFiles } : {}),
      agent: agentFromConfig(options.agent, options.env),
      harness: harnessFromConfig(options.harness, worktrees, downstreamPaths(runDir).swebench, options.env),
      worktrees,
      signal: run.signal,
    });
    row = result.row;
  } catch (error) {
    if (!timedOut || signal.aborted) throw error;
    row = timeoutRow(pair.configuration, pair.instanceId, options.runTimeoutMs);
  } finally {
    clearTimeout(deadline);
    unlink();
    await fs.rm(checkoutDir, { recursive: true, force: true }).catch(() => undefined);
  }

  const trajectory = result?.agent?.trajectory ?? [];
  const record: DownstreamRunRecord = {
    row: { ...row, ...policyColumns(configuration) },
    runHash: pair.runHash,
    injection: result?.injection
      ? {
          files: result.injection.files,
          dropped: result.injection.dropped,
          hadPrediction: pair.predictedFiles === null ? null : pair.predictedFiles.length > 0,
        }
      : null,
    patch: result?.agent?.patch ?? '',
    patchDropped: result?.agent?.patchDropped ?? [],
    actions: actionsOf(trajectory),
    harness: result?.harness
      ? {
          outcome: result.harness.outcome,
          failToPass: result.harness.failToPass,
          passToPass: result.harness.passToPass,
          log: tail(result.harness.log, HARNESS_LOG_TAIL),
        }
      : null,
    trajectoryPath: trajectory.length > 0 ? path.basename(trajectoryPathFor(pair.recordPath)) : null,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    attempt: options.attempt,
  };
  return { record, trajectory };
}

/**
 * Which checkpoint chose the injected files (README "Serving and evaluating the trained policy"): the plan's
 * record of the predictions' policy, so a row of `runs.parquet` alone names the model, step and adapter.
 */
export function policyColumns(configuration: PlannedConfiguration): DownstreamRunPolicyColumns {
  const policy = configuration.predictionsFrom?.policy ?? null;
  return {
    servedModel: policy?.model ?? null,
    baseModel: policy?.baseModel ?? null,
    checkpointStep: policy?.step ?? null,
    adapterSha256: policy?.adapterSha256 ?? null,
  };
}

/** The agent's actions, one per tool call, for action-level case studies (CodeGrep App. F, Table 8). */
export function actionsOf(trajectory: readonly ChatMessage[]): DownstreamAction[] {
  const actions: DownstreamAction[] = [];
  let round = 0;
  for (const message of trajectory) {
    if (message.role !== 'assistant') continue;
    round += 1;
    for (const call of message.tool_calls ?? []) {
      let args: Record<string, unknown> = {};
      try {
        const parsed: unknown = JSON.parse(call.function.arguments);
        if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) args = parsed as Record<string, unknown>;
      } catch {
        // malformed arguments: the action is still recorded, without details
      }
      actions.push({
        round,
        tool: call.function.name,
        command: typeof args.command === 'string' ? args.command.slice(0, 200) : null,
        path: typeof args.path === 'string' ? args.path : null,
      });
    }
  }
  return actions;
}

function tail(text: string, max: number): string {
  return text.length <= max ? text : `[… ${text.length - max} characters cut]\n${text.slice(-max)}`;
}

function timeoutRow(configuration: string, instanceId: string, timeoutMs: number): DownstreamRunOutcomeRow {
  return {
    configuration,
    instanceId,
    resolved: false,
    outcome: 'error',
    rounds: 0,
    inputTokens: 0,
    outputTokens: 0,
    patchBytes: 0,
    endReason: 'timeout',
    error: `run: the run (agent and harness) passed downstream.runTimeoutMs = ${timeoutMs} ms and was stopped; its processes were killed`,
  };
}
