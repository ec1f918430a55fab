import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure, CancelledFailure, Context, log } from '@temporalio/activity';
import { hashConfig, writeParquetArtifact } from '../lib/artifacts';
import { createTrainingEnvironment, loadEnvSamples, startEnvServer } from '../lib/envserver';
import { inspectStoredRun, materializeSampleWorktrees, nodeDataDir, nodeRunDir, openSegmentMirror, type SegmentMirror } from '../lib/store-sync'; // store (issue #13)
import {
  TRAINING_METRICS_SCHEMA_NAME,
  TRAINING_METRICS_SCHEMA_VERSION,
  TrainSegmentInputSchema,
  TrainerEventSchema,
  TrainingHeartbeatSchema,
  latestStepMetrics,
  trainingMetricsArrowSchema,
  type LatestStepMetrics,
  type TrainSegmentInput,
  type TrainSegmentResult,
  type TrainingHeartbeat,
  type TrainingMetricsRow,
  type TrainingProgress,
} from '../schemas/training';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { activityClient } from './kit';
import { environmentLimits, trainerArgs, trainerConfig } from './training-config';
import {
  attemptFiles,
  listSegments,
  newestCheckpoint,
  newestPerStep,
  readSegmentLogRows,
  segmentDir,
  segmentMetricsPath,
  segmentTrainerStarts,
  stepRowFromLine,
  trainingLayout,
} from './training-metrics';
import { LineTail, reapStaleTrainer, removePidFile, spawnTrainer, writePidFile, type TrainerExit } from './training-process';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const POLL_MS = 250;
/** Trainer stderr that no retry can fix: a bad config, data that does not match the checkpoints, no trainer. */
const PERMANENT_TRAINER_ERRORS = [/ConfigError/, /refusing to resume/, /No module named '?trainer/];

type StopReason = 'target' | 'cancelled' | 'protocol';

function nextAttemptNumber(dir: string): number {
  const taken = readdirSync(dir)
    .map((name) => /^attempt-(\d+)\./.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => Number(m[1]));
  return taken.length === 0 ? 1 : Math.max(...taken) + 1;
}

function configError(message: string): ApplicationFailure {
  return ApplicationFailure.create({ type: 'ConfigError', nonRetryable: true, message });
}

async function tailOf(file: string, chars = 3000): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.slice(-chars);
  } catch {
    return '';
  }
}

/** The segment's steps (fromStep, upTo], each once, as `training/metrics/segment-<k>.parquet`. */
async function writeSegmentMetrics(input: { runDir: string; segment: number; fromStep: number; samples: ArtifactRef }, upTo: number, mirror: SegmentMirror | null = null): Promise<{ ref: ArtifactRef; rows: TrainingMetricsRow[] }> {
  const rows = newestPerStep(readSegmentLogRows(input.runDir, input.segment)).filter((r) => r.step > input.fromStep && r.step <= upTo);
  const ref = await writeParquetArtifact({
    path: segmentMetricsPath(input.runDir, input.segment),
    schemaName: TRAINING_METRICS_SCHEMA_NAME,
    schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
    arrowSchema: trainingMetricsArrowSchema,
    rows,
    inputs: [input.samples],
    configHash: hashConfig({ stage: 'training-segment', segment: input.segment, fromStep: input.fromStep, upTo }),
  });
  // store (issue #13): the segment's logs, then its metrics Parquet, to the store; the ref names the store's copy
  if (mirror) {
    await mirror.flush();
    return { ref: await mirror.publishSegmentMetrics(segmentMetricsPath(input.runDir, input.segment)), rows };
  }
  return { ref, rows };
}

/**
 * Throttled `trainingProgress` signals to the training workflow. Each signal costs the workflow about 4
 * history events, so a signal goes out only when the step or the checkpoint step passed the newest one
 * signalled for this segment (by any attempt: `signalled` lives in the heartbeat details). A segment of
 * `segmentSteps` steps therefore sends at most 2 × segmentSteps signals however long it runs or retries.
 */
class TrainingSignals {
  private lastAt = 0;
  constructor(
    private readonly input: { trainingWorkflowId: string | null },
    private readonly everyMs: number,
    private readonly signalled: { step: number; checkpointStep: number },
  ) {}

  send(progress: TrainingProgress, force = false): void {
    const client = activityClient();
    const workflowId = this.input.trainingWorkflowId;
    const newer = progress.step > this.signalled.step || (progress.checkpointStep ?? 0) > this.signalled.checkpointStep;
    const now = Date.now();
    if (!client || !workflowId || !newer || (!force && now - this.lastAt < this.everyMs)) return;
    this.lastAt = now;
    this.signalled.step = Math.max(this.signalled.step, progress.step);
    this.signalled.checkpointStep = Math.max(this.signalled.checkpointStep, progress.checkpointStep ?? 0);
    // Progress is best effort: a finished or unknown workflow must never fail the segment.
    client.workflow.getHandle(workflowId).signal('trainingProgress', progress).catch(() => undefined);
  }
}

/**
 * One training segment on the GPU worker (SPEC §5 "Training", §6): serves the environment (lib/envserver) on
 * loopback, runs `python -m trainer.train --config <segment config> --resume latest` until the step
 * `targetStep` is done, then stops it with SIGTERM (it checkpoints and exits 0). Each step line is
 * heartbeated as `{ step, checkpoint }` and signalled (throttled) to the workflows; the segment's steps are
 * written once each to `training/metrics/segment-<k>.parquet`.
 *
 * A retry (a killed worker, a crashed trainer) first stops any trainer the last attempt left running, then
 * resumes from the newest complete checkpoint; steps done after that checkpoint are redone and their newer
 * records replace the lost ones. On cancellation the trainer gets SIGTERM, then SIGKILL after
 * `stopGraceMs`; a cancellation the workflow asked for (pause, stop, a lower budget) returns the checkpointed
 * step normally, any other (worker shutdown, timeout) fails the attempt so it is retried.
 */
export async function trainSegment(rawInput: TrainSegmentInput): Promise<TrainSegmentResult> {
  let input = TrainSegmentInputSchema.parse(rawInput);
  // store (issue #13): with a store this node works in its own run dir (CODEGREP_DATA_DIR/<runId>), synced through the store
  const mirror = input.store
    ? await openSegmentMirror({ store: input.store.uri, runId: input.runId, segment: input.segment, localRunDir: nodeRunDir(input.runDir, input.runId), onPushError: (error) => log.warn('training: a push to the store failed (the next one retries)', { error: String(error) }) })
    : null;
  if (mirror) input = { ...input, runDir: mirror.localRunDir };
  const context = Context.current();
  const startedAt = Date.now();
  await mkdir(segmentDir(input.runDir, input.segment), { recursive: true });
  await mkdir(trainingLayout(input.runDir).trainerOutput, { recursive: true });
  const where = { segment: input.segment, attempt: context.info.attempt, targetStep: input.targetStep, totalSteps: input.totalSteps };

  const previous = TrainingHeartbeatSchema.safeParse(context.info.heartbeatDetails);
  if (previous.success) log.info('training: retrying a segment from its last heartbeat', { ...where, heartbeat: previous.data });
  // Heartbeat from the start: reaping a stale trainer and starting a new one can take longer than the timeout.
  const beat: TrainingHeartbeat = previous.success ? previous.data : { step: input.fromStep, checkpoint: null, signalled: { step: input.fromStep, checkpointStep: 0 } };
  const heartbeat = () => context.heartbeat({ ...beat, signalled: { ...beat.signalled } });
  heartbeat();
  const keepAlive = setInterval(heartbeat, Math.max(200, (context.info.heartbeatTimeoutMs ?? 60_000) / 3));
  try {
    return await runSegment(input, context, beat, heartbeat, startedAt, mirror);
  } finally {
    clearInterval(keepAlive);
  }
}

async function runSegment(
  input: ReturnType<typeof TrainSegmentInputSchema.parse>,
  context: Context,
  beat: TrainingHeartbeat,
  heartbeat: () => void,
  startedAt: number,
  mirror: SegmentMirror | null = null, // store (issue #13)
): Promise<TrainSegmentResult> {
  const training = input.training;
  const layout = trainingLayout(input.runDir);
  const dir = segmentDir(input.runDir, input.segment);
  const where = { segment: input.segment, attempt: context.info.attempt, targetStep: input.targetStep, totalSteps: input.totalSteps };
  const reaped = await reapStaleTrainer(layout.pidFile, training.stopGraceMs);
  if (reaped.action === 'terminated' || reaped.action === 'killed') log.warn(`training: stopped a trainer left running by an earlier attempt (${reaped.action})`, { ...where, stale: reaped.found });
  if (reaped.action === 'other-host') log.warn('training: a trainer of another host may still run on this run directory', { ...where, stale: reaped.found });

  if (!existsSync(training.python)) throw configError(`training.python: ${training.python} does not exist (run scripts/setup-python.sh on this node)`);
  if (!existsSync(path.join(training.modelDir, 'config.json'))) {
    throw configError(`training.modelDir: ${training.modelDir} is not a local model directory (no config.json); copy the model to the node or build a tiny one with python -m trainer.random_model`);
  }

  // store (issue #13): the store's newest checkpoint and this segment's earlier attempt logs, when newer than ours
  if (mirror) log.info('training: pulled from the store', { ...where, ...(await mirror.pull()), runDir: input.runDir });
  const before = newestCheckpoint(input.runDir);
  const resumedFrom = before?.step ?? 0;
  const result = (fields: Pick<TrainSegmentResult, 'step' | 'checkpoint' | 'stoppedBy'> & { metrics: ArtifactRef; rows: TrainingMetricsRow[]; instances: number; skipped: number; parameters: number | null; device: string | null; attempt: number }): TrainSegmentResult => {
    const last = fields.rows[fields.rows.length - 1];
    return {
      segment: input.segment,
      step: fields.step,
      checkpoint: fields.checkpoint,
      stoppedBy: fields.stoppedBy,
      resumedFrom,
      attempt: fields.attempt,
      metrics: fields.metrics,
      latest: last ? latestStepMetrics(last) : null,
      instances: fields.instances,
      skippedSamples: fields.skipped,
      trainerParameters: fields.parameters,
      device: fields.device,
      wallSeconds: (Date.now() - startedAt) / 1000,
    };
  };
  if (resumedFrom >= input.targetStep) {
    // A previous attempt got there (its result was lost with its worker): nothing to train.
    const { ref, rows } = await writeSegmentMetrics(input, resumedFrom, mirror);
    log.info('training: segment already done by an earlier attempt', { ...where, checkpointStep: resumedFrom });
    // The earlier attempt's trainer said what it ran (model size, device) in its start line; report that rather
    // than nothing, so a run whose last activity result was lost reports the same as one that was not.
    const earlier = segmentTrainerStarts(input.runDir, input.segment).at(-1);
    return result({ step: resumedFrom, checkpoint: mirror?.checkpointUri(before?.step ?? null) ?? before?.path ?? null, stoppedBy: 'already-done', metrics: ref, rows, instances: 0, skipped: 0, parameters: earlier?.parameters ?? null, device: earlier?.device ?? null, attempt: context.info.attempt });
  }

  // store (issue #13): the samples' worktrees, materialized on this node from the run's repoSource
  const worktrees = mirror && input.store ? await materializeSampleWorktrees(input.samples.uri, { repoSource: input.store.repoSource, dataDir: nodeDataDir() ?? path.dirname(input.runDir), signal: context.cancellationSignal }) : null;
  if (worktrees && worktrees.failed.length > 0) log.warn(`training: ${worktrees.failed.length} worktrees could not be materialized on this node`, { first: worktrees.failed.slice(0, 3) });
  const loaded = await loadEnvSamples(input.samples.uri, training.recipe, worktrees ? { worktreePath: worktrees.worktreePath } : {});
  if (loaded.instanceIds.length === 0) {
    throw ApplicationFailure.create({
      type: 'InvalidInput',
      nonRetryable: true,
      message: `no trainable sample in ${input.samples.uri} (${loaded.skipped.length} skipped; first: ${loaded.skipped.slice(0, 3).map((s) => `${s.instanceId}: ${s.reason}`).join('; ') || 'the file is empty'})`,
    });
  }
  if (loaded.skipped.length > 0) log.warn(`training: ${loaded.skipped.length} samples cannot be trained on`, { first: loaded.skipped.slice(0, 5) });

  const environment = createTrainingEnvironment({
    samples: loaded.samples,
    recipe: training.recipe,
    limits: environmentLimits(training),
    codescoutTurnBonus: training.codescoutTurnBonus,
  });
  const server = await startEnvServer(environment, { onInternalError: (error, route) => log.error('training: environment server error', { route, error: String(error) }) });
  const fileAttempt = nextAttemptNumber(dir);
  const files = attemptFiles(dir, fileAttempt);
  await writeFile(
    files.config,
    JSON.stringify(trainerConfig(training, { outputDir: layout.trainerOutput, envUrl: server.url, instanceIds: loaded.instanceIds, totalSteps: input.totalSteps }), null, 2) + '\n',
  );
  if (training.smokeRun) log.warn('training: SMOKE RUN — a plumbing check, not a real training run; its metrics mean nothing', where);

  let trainer;
  try {
    trainer = await spawnTrainer({
      python: training.python,
      args: trainerArgs(training, files.config),
      cwd: projectRoot,
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      stdoutPath: files.stdout,
      stderrPath: files.stderr,
    });
  } catch (error) {
    await server.close();
    throw configError(`training.python: cannot start ${training.python}: ${(error as Error).message}`);
  }
  await writePidFile(layout.pidFile, trainer.pid, { segment: input.segment, attempt: fileAttempt });
  log.info('training: trainer started', { ...where, pid: trainer.pid, processes: training.gpus, envUrl: server.url, instances: loaded.instanceIds.length, resumeFrom: resumedFrom, logs: files.stdout });

  const state = {
    step: resumedFrom,
    checkpoint: before?.path ?? null,
    checkpointStep: before?.step ?? null,
    latest: null as LatestStepMetrics | null,
    parameters: null as number | null,
    device: null as string | null,
    finished: null as 'done' | 'stopped' | null,
    stopReason: null as StopReason | null,
    protocolError: null as unknown,
  };
  const signals = new TrainingSignals(input, training.progressEveryMs, beat.signalled);
  const progress = (): TrainingProgress => ({ segment: input.segment, step: state.step, checkpointStep: state.checkpointStep, latest: state.latest });
  const beatNow = () => {
    beat.step = state.step;
    beat.checkpoint = state.checkpoint;
    heartbeat();
  };
  beatNow();
  let killTimer: NodeJS.Timeout | undefined;
  const stop = (reason: StopReason) => {
    if (state.stopReason) return;
    state.stopReason = reason;
    trainer.signal('SIGTERM');
    killTimer = setTimeout(() => {
      log.warn(`training: the trainer did not exit within ${training.stopGraceMs} ms of SIGTERM; killing it`, where);
      trainer.signal('SIGKILL');
    }, training.stopGraceMs);
  };
  const onAbort = () => stop('cancelled');
  if (context.cancellationSignal.aborted) onAbort();
  else context.cancellationSignal.addEventListener('abort', onAbort, { once: true });

  const onLine = (text: string, line: number) => {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return;
    }
    const event = TrainerEventSchema.safeParse(value);
    if (!event.success) {
      stepRowFromLine(text, { segment: input.segment, attempt: fileAttempt, line, file: files.stdout }); // throws for a bad step line
      return;
    }
    const e = event.data;
    if (e.event === 'start') {
      state.parameters = e.parameters;
      state.device = e.device;
    } else if (e.event === 'resumed') {
      state.step = e.step;
      state.checkpoint = e.checkpoint;
      state.checkpointStep = e.step;
      beatNow();
    } else if (e.event === 'checkpoint') {
      state.checkpoint = e.path;
      state.checkpointStep = e.step;
      beatNow();
      mirror?.notify(); // store (issue #13)
      signals.send(progress(), true);
    } else if (e.event === 'step') {
      const row = stepRowFromLine(text, { segment: input.segment, attempt: fileAttempt, line, file: files.stdout })!;
      state.step = row.step;
      state.latest = latestStepMetrics(row);
      beatNow();
      mirror?.notify(); // store (issue #13): the step line covers its checkpoint: its marker may go up now
      signals.send(progress());
      if (row.step >= input.targetStep && input.targetStep < input.totalSteps) stop('target');
    } else if (e.event === 'done' || e.event === 'stopped') {
      state.finished = e.event;
      state.step = e.step;
    }
  };

  const tail = new LineTail(files.stdout);
  const readLines = async (final: boolean) => {
    for (const { line, text } of await tail.read(final)) {
      try {
        onLine(text, line);
      } catch (error) {
        state.protocolError ??= error;
        stop('protocol');
      }
    }
  };
  let exit: TrainerExit | null = null;
  void trainer.exited.then((e) => (exit = e));
  try {
    while (exit === null) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      await readLines(false);
    }
    await readLines(true);
  } finally {
    clearTimeout(killTimer);
    context.cancellationSignal.removeEventListener('abort', onAbort);
    await server.close();
    await removePidFile(layout.pidFile);
  }
  const exited = exit as TrainerExit;
  // store (issue #13): the last logs and checkpoint reach the store whatever the exit (a failed attempt's too; its
  // own error wins over the store's)
  if (mirror) await mirror.flush().catch((error: unknown) => { if (exited.code === 0 && !state.protocolError) throw error; log.warn('training: the last push to the store failed', { ...where, error: String(error) }); });
  const stats = environment.stats();
  log.info('training: trainer exited', { ...where, exit: exited, step: state.step, stopReason: state.stopReason, episodes: stats.opened, open: stats.open });

  if (state.protocolError) throw state.protocolError;
  const cancelled = context.cancellationSignal.aborted;
  const cancelReason = context.cancellationSignal.reason instanceof CancelledFailure ? context.cancellationSignal.reason.message : 'CANCELLED';
  if (exited.code !== 0) {
    if (cancelled) throw new CancelledFailure(cancelReason);
    const stderr = await tailOf(files.stderr);
    const permanent = PERMANENT_TRAINER_ERRORS.some((pattern) => pattern.test(stderr));
    throw ApplicationFailure.create({
      type: permanent ? 'TrainerConfigError' : 'TrainerFailed',
      nonRetryable: permanent,
      message: `the trainer exited with ${exited.code !== null ? `code ${exited.code}` : `signal ${exited.signal}`} at step ${state.step} (segment ${input.segment}, log ${files.stderr}):\n${stderr}`,
    });
  }

  const after = newestCheckpoint(input.runDir);
  const reached = after?.step ?? 0;
  if (after && reached !== state.step) log.warn('training: the newest checkpoint is not the step the trainer reported last', { ...where, checkpointStep: reached, reported: state.step });
  const { ref, rows } = await writeSegmentMetrics(input, reached, mirror);
  const stoppedBy = state.stopReason === 'target' ? 'target' : state.stopReason === 'cancelled' ? 'cancelled' : state.finished === 'done' ? 'budget' : 'signal';
  state.step = reached;
  state.checkpoint = after?.path ?? null;
  state.checkpointStep = after?.step ?? null;
  beatNow();
  signals.send(progress(), true);
  if (cancelled && cancelReason !== 'CANCELLED') {
    // Not the workflow's request (worker shutdown, timeout): fail this attempt, the retry resumes from here.
    throw new CancelledFailure(cancelReason);
  }
  return result({
    step: reached,
    checkpoint: mirror?.checkpointUri(after?.step ?? null) ?? after?.path ?? null, // store (issue #13)
    stoppedBy,
    metrics: ref,
    rows,
    instances: loaded.instanceIds.length,
    skipped: loaded.skipped.length,
    parameters: state.parameters,
    device: state.device,
    attempt: context.info.attempt,
  });
}

/** What a training run left on disk: where a new workflow on the same run directory continues from. */
export async function inspectTrainingRun(input: { runDir: string; runId?: string; store?: string }): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  if (input.store) return inspectStoredRun(input.store, input.runId ?? path.basename(input.runDir)); // store (issue #13)
  const checkpoint = newestCheckpoint(input.runDir);
  const segments = listSegments(input.runDir);
  return { checkpointStep: checkpoint?.step ?? null, checkpoint: checkpoint?.path ?? null, lastSegment: segments.length > 0 ? segments[segments.length - 1]! : 0 };
}
