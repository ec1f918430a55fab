import { promises as fs } from 'node:fs';
import path from 'node:path';
import { ApplicationFailure, Context, log } from '@temporalio/activity';
import { checkCachedArtifact, readJsonArtifact, sha256File, writeBytesAtomically, writeJsonArtifact } from '../lib/artifacts';
import {
  createBuiltinAgent,
  createLocalHarness,
  createOpenHandsAdapter,
  createSweBenchHarness,
  gitRunWorktrees,
  runDownstreamInstance,
  type DownstreamAgent,
  type DownstreamInstanceRun,
  type Harness,
  type RunWorktreeFactory,
} from '../lib/downstream';
import { followAbort } from '../lib/llm/abort';
import { withRepoLock } from '../lib/worktrees/repo-lock';
import type { ChatMessage } from '../schemas/agent';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { DownstreamRunRow } from '../schemas/downstream';
import {
  DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
  DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
  DownstreamPlanSchema,
  DownstreamRunRecordSchema,
  RunDownstreamPairInputSchema,
  type DownstreamAction,
  type DownstreamAgentConfig,
  type DownstreamHarnessConfig,
  type DownstreamPlan,
  type DownstreamRunRecord,
  type PlannedPair,
  type RunDownstreamPairInput,
  type RunDownstreamPairOutput,
} from '../schemas/downstream-config';
import { downstreamPaths, fileSafe } from './downstream-plan';

const HARNESS_LOG_TAIL = 20_000;

// ---------------------------------------------------------------------------------------------------------
// Plan (read once per process and plan)

const plans = new Map<string, DownstreamPlan>();

export async function loadPlan(ref: ArtifactRef): Promise<DownstreamPlan> {
  const cached = plans.get(ref.sha256);
  if (cached) return cached;
  const actual = await sha256File(ref.uri).catch(() => null);
  if (actual !== ref.sha256) {
    throw ApplicationFailure.create({
      type: 'InvalidInput',
      nonRetryable: true,
      message: `downstream plan ${ref.uri} ${actual === null ? 'is missing' : 'changed on disk'} since the workflow planned it; start the stage again`,
    });
  }
  const plan = DownstreamPlanSchema.parse(await readJsonArtifact(ref.uri));
  if (plans.size >= 4) plans.delete(plans.keys().next().value!);
  plans.set(ref.sha256, plan);
  return plan;
}

export function pairOf(plan: DownstreamPlan, configuration: string, instanceId: string): PlannedPair {
  const pair = plan.pairs.find((p) => p.configuration === configuration && p.instanceId === instanceId);
  if (!pair) throw ApplicationFailure.create({ type: 'InvalidInput', nonRetryable: true, message: `downstream plan has no run (${configuration}, ${instanceId})` });
  return pair;
}

const recordExpectation = (pair: PlannedPair) => ({
  schemaName: DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
  schemaVersion: DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
  inputs: [],
  configHash: pair.runHash,
});

/** The pair's finished record, or null when there is none or it was made under other settings. */
export async function finishedRecord(pair: PlannedPair): Promise<{ ref: ArtifactRef; record: DownstreamRunRecord } | null> {
  const check = await checkCachedArtifact(pair.recordPath, recordExpectation(pair));
  if (!check.hit) return null;
  const parsed = DownstreamRunRecordSchema.safeParse(await readJsonArtifact(check.ref.uri));
  return parsed.success ? { ref: check.ref, record: parsed.data } : null;
}

// ---------------------------------------------------------------------------------------------------------
// Agent, harness and checkouts from the config

function buildAgent(config: DownstreamAgentConfig): DownstreamAgent {
  if (config.kind === 'builtin') {
    const apiKey = process.env[config.apiKeyEnv];
    return createBuiltinAgent({
      endpoint: { baseUrl: config.baseUrl, model: config.model, ...(apiKey ? { apiKey } : {}) },
      maxRounds: config.maxRounds,
      temperature: config.temperature,
      ...(config.maxTokensPerCall === undefined ? {} : { maxTokensPerCall: config.maxTokensPerCall }),
      retry: { maxAttempts: config.maxAttempts, timeoutMs: config.callTimeoutMs },
    });
  }
  return createOpenHandsAdapter({
    command: config.command,
    timeoutMs: config.timeoutMs,
    ...(config.outputFile ? { outputFile: config.outputFile } : {}),
    ...(config.env ? { env: config.env } : {}),
    ...(config.cwd ? { cwd: config.cwd } : {}),
  });
}

function buildHarness(config: DownstreamHarnessConfig, worktrees: RunWorktreeFactory, runDir: string): Harness {
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
    workDir: downstreamPaths(runDir).swebench,
    timeoutMs: config.timeoutMs,
    ...(config.modelName ? { modelName: config.modelName } : {}),
    ...(config.env ? { env: config.env } : {}),
  });
}

// ---------------------------------------------------------------------------------------------------------
// Record

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

function timeoutRow(configuration: string, instanceId: string, timeoutMs: number): DownstreamRunRow {
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

/**
 * One (configuration, instance) run of the downstream study (CodeGrep §4.3): the injected prompt, the frozen
 * agent in a fresh checkout, the harness on its patch (lib/downstream runDownstreamInstance). The result is
 * written as a run record (JSON + manifest keyed by the run's hash) and the conversation beside it; a record
 * already there is returned without running anything, so a retried, resumed or repeated stage never runs a
 * finished pair again. The run has its own deadline (`runTimeoutMs`): past it the agent and harness processes
 * are killed and the pair is an `error` row, not a retry. Cancellation of the workflow kills them too.
 */
export async function runDownstreamPair(rawInput: RunDownstreamPairInput): Promise<RunDownstreamPairOutput> {
  const input = RunDownstreamPairInputSchema.parse(rawInput);
  const context = Context.current();
  const plan = await loadPlan(input.plan);
  const pair = pairOf(plan, input.configuration, input.instanceId);
  const reuse = async (): Promise<RunDownstreamPairOutput | null> => {
    const existing = await finishedRecord(pair);
    if (!existing) return null;
    log.info('downstream run: finished before, reused', { configuration: pair.configuration, instanceId: pair.instanceId });
    return { row: existing.record.row, record: existing.ref, reused: true };
  };
  const before = await reuse();
  if (before) return before;

  const heartbeat = { configuration: pair.configuration, instanceId: pair.instanceId, attempt: context.info.attempt, startedAt: new Date().toISOString() };
  context.heartbeat(heartbeat);
  // Heartbeats carry cancellation to the activity: keep them going while the agent and the tests run.
  const keepAlive = setInterval(() => context.heartbeat(heartbeat), Math.max(200, (context.info.heartbeatTimeoutMs ?? 60_000) / 3));
  keepAlive.unref();
  try {
    // One attempt per pair at a time: an attempt of a terminated or timed-out workflow may still be stopping
    // when the next one starts. A lock whose holder died (a killed worker) is broken at once.
    const paths = downstreamPaths(input.runDir);
    const lockPath = path.join(paths.locks, fileSafe(pair.configuration), `${fileSafe(pair.instanceId)}.lock`);
    return await withRepoLock(lockPath, async () => (await reuse()) ?? (await runPair(input, plan, pair)), {
      signal: context.cancellationSignal,
      waitTimeoutMs: input.runTimeoutMs + 5 * 60_000,
    });
  } finally {
    clearInterval(keepAlive);
  }
}

async function runPair(input: ReturnType<typeof RunDownstreamPairInputSchema.parse>, plan: DownstreamPlan, pair: PlannedPair): Promise<RunDownstreamPairOutput> {
  const context = Context.current();
  const configuration = plan.configurations.find((c) => c.name === pair.configuration)!;
  const instance = plan.instances.find((i) => i.instance_id === pair.instanceId)!;
  const run = new AbortController();
  const unlink = followAbort(context.cancellationSignal, run);
  let timedOut = false;
  const deadline = setTimeout(() => {
    timedOut = true;
    run.abort(new Error(`run passed ${input.runTimeoutMs} ms`));
  }, input.runTimeoutMs);
  deadline.unref();

  // The pair's own checkout folder: whatever is there was left by an attempt that died (a killed worker never
  // disposed its checkouts), so it goes; its git registrations are pruned by the next checkout's removal.
  const checkoutDir = path.join(downstreamPaths(input.runDir).checkouts, fileSafe(pair.configuration), fileSafe(pair.instanceId));
  await fs.rm(checkoutDir, { recursive: true, force: true });
  const started = Date.now();
  const worktrees = gitRunWorktrees({ cacheDir: input.checkouts.cacheDir, runDir: checkoutDir, source: input.checkouts.repoSource });
  let result: DownstreamInstanceRun | null = null;
  let row: DownstreamRunRow;
  try {
    result = await runDownstreamInstance({
      configuration: { name: configuration.name, source: configuration.source, ...(configuration.k ? { k: configuration.k } : {}) },
      instance,
      ...(pair.predictedFiles ? { predictedFiles: pair.predictedFiles } : {}),
      agent: buildAgent(input.agent),
      harness: buildHarness(input.harness, worktrees, input.runDir),
      worktrees,
      signal: run.signal,
    });
    row = result.row;
  } catch (error) {
    if (!timedOut || context.cancellationSignal.aborted) throw error;
    row = timeoutRow(pair.configuration, pair.instanceId, input.runTimeoutMs);
  } finally {
    clearTimeout(deadline);
    unlink();
    await fs.rm(checkoutDir, { recursive: true, force: true }).catch(() => undefined);
  }

  let trajectoryPath: string | null = null;
  const trajectory = result?.agent?.trajectory ?? [];
  if (trajectory.length > 0) {
    trajectoryPath = pair.recordPath.replace(/\.json$/, '.trajectory.json');
    await writeBytesAtomically(trajectoryPath, `${JSON.stringify(trajectory, null, 1)}\n`);
  }
  const record: DownstreamRunRecord = {
    row,
    runHash: pair.runHash,
    injection: result?.injection
      ? { files: result.injection.files, dropped: result.injection.dropped, hadPrediction: pair.predictedFiles === null ? null : pair.predictedFiles.length > 0 }
      : null,
    patch: result?.agent?.patch ?? '',
    actions: actionsOf(trajectory),
    harness: result?.harness
      ? { outcome: result.harness.outcome, failToPass: result.harness.failToPass, passToPass: result.harness.passToPass, log: tail(result.harness.log, HARNESS_LOG_TAIL) }
      : null,
    trajectoryPath: trajectoryPath ? path.basename(trajectoryPath) : null,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    attempt: context.info.attempt,
  };
  const ref = await writeJsonArtifact(pair.recordPath, record, recordExpectation(pair));
  log.info('downstream run: done', { configuration: row.configuration, instanceId: row.instanceId, outcome: row.outcome, rounds: row.rounds, ms: record.durationMs });
  return { row, record: ref, reused: false };
}
