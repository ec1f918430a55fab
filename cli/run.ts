import path from 'node:path';
import { Client, WorkflowIdConflictPolicy, WorkflowNotFoundError, type WorkflowHandle } from '@temporalio/client';
import { activityTimeouts, temporalConfig } from '../temporal.config';
import type { PipelineResult } from '../workflows/pipeline';
import type { WorkflowProgress } from '../schemas/progress';
import { resolveConfig, type ResolvedConfig } from '../lib/config';
import { readConfigFile } from './config-file';
import { startDevServer } from './dev-server';
import { connectClient, isPlaintext, probeTemporal, unreachableAdvice, TemporalUnreachableError } from '../workers/connection';
import { liveProgress } from './live-progress';
import { pipelineOutcome } from './pipeline-outcome';
import { appendRunLog, closeRunLog, installRunLogger, openRunLog } from './run-log';
import { ProgressView } from './progress-view';
import { formatCatmSummary, formatEnvironmentSummary, formatFinalScreen } from './summary-table';
import { createCpuWorker } from '../workers/cpu';
import { createGpuWorker } from '../workers/gpu';
import { rootMessage } from '../lib/errors/root-message';
import { livePollers, unclaimedWorkflowTaskMs } from './live-pollers';
import { guardWorkerProcess } from '../workers/process-guard';

export interface RunOptions {
  configFile: string;
  runId?: string;
  /** A folder of bare mirrors `<owner>__<name>.git`: sets environment.repoSource to it (offline runs). */
  mirrors?: string;
  /** Start the embedded dev server when nothing answers at the address (default true for local addresses). */
  embedded: boolean;
  /** Start an in-process worker when no worker polls the task queue (default true). */
  worker: boolean;
  /** Return after starting instead of following progress. */
  detach: boolean;
  /** Says on the final screen that the run is a toy (the learn demo), and what kind. */
  toyTask?: string;
}

function isLocal(address: string): boolean {
  return /^(localhost|127\.0\.0\.1|\[::1\]):\d+$/.test(address);
}

async function hasPollers(client: Client, taskQueue: string, kind: 'workflow' | 'activity' = 'workflow'): Promise<boolean> {
  return (await livePollers(client, taskQueue, kind)).length > 0;
}

/**
 * How long the pipeline's workflow task may wait for a worker before this command starts one itself: the
 * poller it trusted (on another machine, or a reused pid) was not live. A live worker starts it within moments.
 */
const UNCLAIMED_TASK_MS = 10_000;

export async function runCommand(options: RunOptions): Promise<number> {
  const config = prepareRunConfig(options);
  if (!(await ensureTemporalServer(config.dataDir, options.embedded))) return 2;

  const connection = await connectClient();
  const client = new Client({ connection, namespace: temporalConfig.namespace });
  const workers = new InProcessWorkers(config.runDir);
  try {
    const needCpuWorker = options.worker && !(await hasPollers(client, temporalConfig.taskQueues.cpu));
    const needGpuWorker = options.worker && needsGpu(config) && !(await hasPollers(client, temporalConfig.taskQueues.gpu, 'activity'));
    const logFile = openLogs(config.runDir, needCpuWorker || needGpuWorker);
    if (needCpuWorker) await workers.startCpu(`no live worker polls task queue ${temporalConfig.taskQueues.cpu}`);
    if (needGpuWorker) await workers.startGpu();

    const { handle, workflowId, webUi } = await startPipeline(client, config);
    if (options.detach) {
      // Returning leaves nothing behind to run it: wait long enough to tell a user whose worker is dead.
      if (!needCpuWorker) await warnIfUnclaimed(client, workflowId);
      return 0;
    }
    const watchdog = workers.hasCpuWorker
      ? null
      : watchUnclaimedTask(client, workflowId, async (why) => {
          if (options.worker) await workers.startCpu(why);
          else console.error(`codegrep: ${why}; start one with 'codegrep worker'.`);
        });
    const result = await followPipeline(client, handle, workflowId, logFile, watchdog);
    if (!result) return 1;
    for (const outcome of result.outcomes) if (outcome.reason) appendRunLog(`stage ${outcome.stage} ${outcome.status}: ${outcome.reason}`);
    printResult(result, config.runDir, logFile);
    console.log(
      `\n${formatFinalScreen(result, { runDir: config.runDir, webUi, judgeMode: config.judge.mode, stages: config.stages, retrievers: config.evaluation.retrievers, toyTask: options.toyTask })}`,
    );
    // 3: the pipeline completed but some stage failed or was skipped (the table above says which and why).
    return result.outcomes.every((o) => o.status === 'completed') ? 0 : 3;
  } finally {
    await workers.shutdown();
    await connection.close();
    await closeRunLog();
  }
}

/** The config file with the command line's overrides, a default run id and this deployment's timeouts. */
function prepareRunConfig(options: RunOptions): ResolvedConfig {
  const raw = readConfigFile(options.configFile);
  if (options.runId) raw.runId = options.runId;
  if (options.mirrors) {
    const environment = typeof raw.environment === 'object' && raw.environment !== null ? raw.environment : {};
    raw.environment = { ...environment, repoSource: { kind: 'mirror-dir', dir: path.resolve(options.mirrors) } };
  }
  if (raw.runId === undefined) {
    raw.runId = `${path.basename(options.configFile).replace(/\.(ya?ml|json)$/i, '')}-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '')}`;
  }
  raw.temporal = { activityTimeouts };
  // Validate here too, so a bad config is reported before anything starts.
  return resolveConfig(raw, options.configFile);
}

/**
 * True when a Temporal server answers, starting the embedded dev server when it may; false (after saying why)
 * when none answers and this command may not start one.
 */
async function ensureTemporalServer(dataDir: string, embedded: boolean): Promise<boolean> {
  const address = temporalConfig.address;
  const unreachable = await probeTemporal();
  if (!unreachable) return true;
  // Only a plaintext local address with nothing listening may be the embedded dev server's to start.
  if (!embedded || !isLocal(address) || !isPlaintext() || !(unreachable instanceof TemporalUnreachableError)) {
    console.error(unreachableAdvice(unreachable));
    return false;
  }
  console.log(`codegrep: starting the embedded Temporal dev server (state in ${path.join(dataDir, 'temporal.db')})…`);
  const server = await startDevServer({ dataDir, port: Number(address.split(':').pop()) });
  console.log(
    `codegrep: Temporal dev server up at ${server.address}, Web UI ${server.uiUrl} (log ${server.logFile}); it keeps running — stop it with 'codegrep server stop'.`,
  );
  return true;
}

/** Whether the run needs the GPU task queue's worker. */
function needsGpu(config: ResolvedConfig): boolean {
  return (
    config.stages.includes('training') ||
    // A trained policy is served by the GPU worker (lib/policy-server), with or without a training stage.
    (config.stages.includes('evaluation') && config.evaluation.retrievers.some((r) => r.kind === 'agent' && r.policy !== undefined))
  );
}

/**
 * The terminal shows progress, one line per failure and the summary; the in-process workers' logs and the
 * failures' full messages go to the run's log file, whose path this returns.
 */
function openLogs(runDir: string, withWorkers: boolean): string {
  const logFile = withWorkers ? installRunLogger(runDir) : openRunLog(runDir);
  console.log(
    `codegrep: ${withWorkers ? 'worker and SDK logs, and full failure messages' : 'full failure messages'} of this run: ${logFile}`,
  );
  return logFile;
}

/** The workers this command runs in its own process when none polls their task queue; shut down when it returns. */
class InProcessWorkers {
  private cpu: Awaited<ReturnType<typeof createCpuWorker>> | null = null;
  private cpuRun: Promise<void> | null = null;
  private gpu: Awaited<ReturnType<typeof createGpuWorker>> | null = null;
  private gpuRun: Promise<void> | null = null;
  private releaseGuard: (() => void) | null = null;

  constructor(private readonly runDir: string) {}

  get hasCpuWorker(): boolean {
    return this.cpu !== null;
  }

  async startCpu(why: string): Promise<void> {
    console.log(`codegrep: ${why}; starting one in this process (bundling workflows)…`);
    installRunLogger(this.runDir);
    this.releaseGuard ??= guardWorkerProcess();
    this.cpu = await createCpuWorker();
    this.cpuRun = this.cpu.worker.run();
  }

  async startGpu(): Promise<void> {
    console.log(
      `codegrep: no GPU worker polls task queue ${temporalConfig.taskQueues.gpu}; training runs in this process, on this machine (start \`npm run worker:gpu\` on a GPU node instead for real runs).`,
    );
    this.releaseGuard ??= guardWorkerProcess();
    this.gpu = await createGpuWorker();
    this.gpuRun = this.gpu.worker.run();
  }

  async shutdown(): Promise<void> {
    if (this.gpu) {
      this.gpu.worker.shutdown();
      await this.gpuRun;
      await this.gpu.close();
    }
    if (this.cpu) {
      this.cpu.worker.shutdown();
      await this.cpuRun;
      await this.cpu.close();
    }
    this.releaseGuard?.();
  }
}

async function startPipeline(client: Client, config: ResolvedConfig) {
  const workflowId = `${config.runId}/pipeline`;
  const handle = await client.workflow.start('pipeline', {
    taskQueue: temporalConfig.taskQueues.cpu,
    workflowId,
    args: [config],
    // Re-running a config whose pipeline is still running attaches to it instead of starting a second one.
    workflowIdConflictPolicy: WorkflowIdConflictPolicy.USE_EXISTING,
    memo: { config: { runId: config.runId, recipe: config.recipe, stages: config.stages, judge: config.judge.mode } },
    searchAttributes: {
      [temporalConfig.searchAttributes.run]: [config.runId],
      [temporalConfig.searchAttributes.recipe]: [config.recipe],
      [temporalConfig.searchAttributes.stage]: ['starting'],
    },
  });
  const webUi = `${temporalConfig.uiUrl}/namespaces/${temporalConfig.namespace}/workflows/${encodeURIComponent(workflowId)}`;
  console.log(`codegrep: pipeline ${workflowId} (run ${handle.firstExecutionRunId})\n  Web UI: ${webUi}`);
  return { handle, workflowId, webUi };
}

// Never wait silently: a workflow task nobody picks up means the worker seen polling was not live.
const unclaimedFor = (client: Client, workflowId: string) => unclaimedWorkflowTaskMs(client, workflowId).catch(() => null);

const notLive = (waited: number) =>
  `no worker has picked up the pipeline's workflow task for ${Math.round(waited / 1000)} s (the worker seen polling task queue ${temporalConfig.taskQueues.cpu} is not live)`;

/** Waits up to a little over UNCLAIMED_TASK_MS for a worker to pick up the pipeline's first task; says so if none does. */
async function warnIfUnclaimed(client: Client, workflowId: string): Promise<void> {
  for (let i = 0; i < UNCLAIMED_TASK_MS / 1000 + 2; i++) {
    await new Promise((r) => setTimeout(r, 1_000));
    const waited = await unclaimedFor(client, workflowId);
    if (waited === null) break;
    if (waited >= UNCLAIMED_TASK_MS) {
      console.error(`codegrep: ${notLive(waited)}; start one with 'codegrep worker'.`);
      break;
    }
  }
}

/**
 * Checks each second whether the pipeline's workflow task has waited UNCLAIMED_TASK_MS for a worker, and the
 * first time it has, calls onUnclaimed once with the reason. stop() waits for a call in progress.
 */
function watchUnclaimedTask(client: Client, workflowId: string, onUnclaimed: (why: string) => Promise<void>) {
  let done = false;
  let watching: Promise<void> | null = null;
  const timer = setInterval(() => {
    if (done || watching) return;
    watching = (async () => {
      const waited = await unclaimedFor(client, workflowId);
      if (waited === null || waited < UNCLAIMED_TASK_MS || done) return;
      done = true;
      await onUnclaimed(notLive(waited));
    })()
      .catch((error: unknown) => console.error(`codegrep: could not start a worker in this process: ${rootMessage(error)}`))
      .finally(() => (watching = null));
  }, 1_000);
  return {
    async stop(): Promise<void> {
      done = true;
      clearInterval(timer);
      await watching;
    },
  };
}

/**
 * Draws the stages' progress until the pipeline ends and returns its result; null when the pipeline itself did
 * not finish (failed, cancelled or terminated, not a stage's failure), after one line on the terminal.
 */
async function followPipeline(
  client: Client,
  handle: WorkflowHandle,
  workflowId: string,
  logFile: string,
  watchdog: { stop(): Promise<void> } | null,
): Promise<PipelineResult | null> {
  const view = new ProgressView();
  const poll = setInterval(() => void drawProgress(client, workflowId, view), 500);
  try {
    return (await pipelineOutcome(handle)).result;
  } catch (error) {
    const message = rootMessage(error);
    appendRunLog(`pipeline ${workflowId} did not finish: ${message}`);
    console.error(
      `codegrep: pipeline ${workflowId} did not finish: ${firstLine(message)}${logFile ? ` (full message in ${logFile})` : ''}`,
    );
    return null;
  } finally {
    await watchdog?.stop();
    clearInterval(poll);
    await drawProgress(client, workflowId, view);
    view.stop();
  }
}

/** One line of a possibly long, multi-line message (a trainer's stderr, a stack): the terminal shows one line per failure. */
function firstLine(message: string, max = 600): string {
  const line =
    message
      .split('\n')
      .find((l) => l.trim() !== '')
      ?.trim() ?? message;
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

async function drawProgress(client: Client, workflowId: string, view: ProgressView): Promise<void> {
  try {
    // The stage workflows show their own progress (the pipeline takes no progress signals: README "History bounds").
    const top = await client.workflow.getHandle(workflowId).query<WorkflowProgress>('progress');
    for (const childId of Object.values(top.children)) {
      const child = await liveProgress(client, childId);
      view.update(child, `${child.workflow}/`);
    }
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) return; // query before the first workflow task: try again later
  }
}

function printResult(result: PipelineResult, runDir: string, logFile: string): void {
  const failed = result.outcomes.filter((o) => o.status !== 'completed').length;
  console.log(
    `\ncodegrep: run ${result.runId} ${failed > 0 ? `finished with ${failed} stage(s) not completed` : 'finished'}. Artifacts in ${runDir}\n\nStages`,
  );
  for (const outcome of result.outcomes) {
    const dropped = outcome.stage === 'environment' ? (result.environment?.materialize.droppedSamples ?? 0) : 0;
    const note = dropped > 0 ? ` (${dropped} samples dropped: their commits could not be materialized; later stages ran on the rest)` : '';
    console.log(`  ${outcome.stage.padEnd(12)} ${outcome.status}${outcome.reason ? `: ${firstLine(outcome.reason)}` : ''}${note}`);
  }
  if (failed > 0) console.log(`  (full messages in ${logFile})`);
  if (result.catm) {
    console.log('\nCATM summary (CodeGrep §3.4)\n' + formatCatmSummary(result.catm.summaryValues));
    console.log(`\n  samples:     ${result.catm.samples.uri} (${result.catm.samples.rows} rows)`);
    console.log(`  labels:      ${result.catm.labels.uri} (${result.catm.labels.rows} rows)`);
    console.log(`  judgements:  ${result.catm.judgements.uri} (${result.catm.judgements.rows} rows)`);
    console.log(`  summary:     ${result.catm.summary.uri}`);
  }
  if (result.environment) {
    console.log('\nEnvironment (CodeGrep §3.3)\n' + formatEnvironmentSummary(result.environment));
  }
  if (result.training) {
    const t = result.training;
    console.log(`\nTraining (GRPO, CodeGrep §3.6)${t.report.smokeRun ? ' — SMOKE RUN: a tiny random model, not a trained retriever' : ''}`);
    console.log(
      `  steps ${t.step} of ${t.budget} in ${t.segments} segments${t.stoppedEarly ? ' (stopped early)' : ''}; checkpoint ${t.checkpoint ?? '—'}`,
    );
    console.log(`  report: ${t.report.html}`);
  }
  if (result.evaluation) {
    console.log('\nRetrieval evaluation (CodeGrep Table 2 / CodeScout Table 3)');
    for (const retriever of result.evaluation.summaryValues.retrievers) {
      const t = retriever.table2;
      const f = (value: number | null, scale = 1) => (value === null ? '—' : (scale * value).toFixed(scale === 1 ? 3 : 1));
      console.log(
        `  ${retriever.name.padEnd(16)} Fβ mean ${f(t.fBetaMean.value)}  median ${f(t.fBetaMedian.value)}  P ${f(t.precision.value)}  R ${f(t.recall.value)}  Fβ≥0.8 ${f(t.shareHighQuality.value, 100)}%  (${retriever.instances} instances${retriever.failed ? `, ${retriever.failed} failed` : ''})`,
      );
    }
    console.log(`  report: ${result.evaluation.report.html}`);
  }
  if (result.downstream) {
    console.log('\nDownstream injection (CodeGrep Table 3)');
    for (const [configuration, counts] of Object.entries(result.downstream.outcomes)) {
      console.log(
        `  ${configuration.padEnd(16)} ${Object.entries(counts)
          .map(([outcome, n]) => `${outcome} ${n}`)
          .join(', ')}`,
      );
    }
    console.log(`  report: ${result.downstream.reportMarkdown} / ${result.downstream.reportHtml}`);
  }
}
