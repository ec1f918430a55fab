import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ApplicationFailure, CancelledFailure, Context, log } from '@temporalio/activity';
import * as training from '../lib/training';
import * as storeSync from '../lib/store-sync';
import { TrainSegmentInputSchema, TrainingHeartbeatSchema } from '../schemas/training/activity-io';
import type { TrainSegmentInput, TrainSegmentResult, TrainingHeartbeat, TrainingProgress } from '../schemas/training/activity-io';
import { activityClient, configError, invalidInput, nonRetryable } from './kit';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * One training segment on the GPU worker (SPEC §5 "Training", §6): serves the environment (lib/envserver) on
 * loopback, runs `python -m trainer.train --config <segment config> --resume latest` (lib/training runTrainer)
 * until the step `targetStep` is done, then stops it with SIGTERM (it checkpoints and exits 0). Each step is
 * heartbeated as `{ step, checkpoint }` and signalled (throttled) to the workflow; the segment's steps are
 * written once each to `training/metrics/segment-<k>.parquet`.
 *
 * A retry (a killed worker, a crashed trainer) first stops any trainer the last attempt left running, then
 * resumes from the newest complete checkpoint; steps done after that checkpoint are redone and their newer
 * records replace the lost ones. On cancellation the trainer gets SIGTERM, then SIGKILL after
 * `stopGraceMs`; a cancellation the workflow asked for (pause, stop, a lower budget) returns the checkpointed
 * step normally, any other (worker shutdown, timeout) fails the attempt so it is retried.
 */
export async function trainSegment(rawInput: TrainSegmentInput): Promise<TrainSegmentResult> {
  const parsed = TrainSegmentInputSchema.parse(rawInput);
  // With a run store (issue #13) this node works in its own run dir (CODEGREP_DATA_DIR/<runId>) and shares
  // samples, checkpoints and logs with the other nodes through the store only.
  const mirror = parsed.store
    ? await storeSync.openSegmentMirror({
        store: parsed.store.uri,
        runId: parsed.runId,
        segment: parsed.segment,
        localRunDir: storeSync.nodeRunDir(parsed.runDir, parsed.runId),
        onPushError: (error) => log.warn('training: a push to the store failed (the next one retries)', { error: String(error) }),
      })
    : null;
  const input = mirror ? { ...parsed, runDir: mirror.localRunDir } : parsed;
  const context = Context.current();
  const startedAt = Date.now();
  const t = input.training;
  const layout = training.trainingLayout(input.runDir);
  const dir = training.segmentDir(input.runDir, input.segment);
  await mkdir(dir, { recursive: true });
  await mkdir(layout.trainerOutput, { recursive: true });
  const where = { segment: input.segment, attempt: context.info.attempt, targetStep: input.targetStep, totalSteps: input.totalSteps };

  const previous = TrainingHeartbeatSchema.safeParse(context.info.heartbeatDetails);
  if (previous.success) log.info('training: retrying a segment from its last heartbeat', { ...where, heartbeat: previous.data });
  // Heartbeat from the start: reaping a stale trainer and starting a new one can take longer than the timeout.
  const beat: TrainingHeartbeat = previous.success
    ? previous.data
    : { step: input.fromStep, checkpoint: null, signalled: { step: input.fromStep, checkpointStep: 0 } };
  const client = activityClient();
  const workflowId = input.trainingWorkflowId;
  // Progress is best effort: a finished or unknown workflow must never fail the segment.
  const signal =
    client && workflowId
      ? (p: TrainingProgress) =>
          void client.workflow
            .getHandle(workflowId)
            .signal('trainingProgress', p)
            .catch(() => undefined)
      : null;
  const progress = new training.SegmentProgress(beat, input.segment, t.progressEveryMs, {
    heartbeat: (details) => context.heartbeat(details),
    signal,
  });
  progress.heartbeat();
  const keepAlive = setInterval(() => progress.heartbeat(), Math.max(200, (context.info.heartbeatTimeoutMs ?? 60_000) / 3));
  try {
    const reaped = await training.reapStaleTrainer(layout.pidFile, t.stopGraceMs);
    if (reaped.action === 'terminated' || reaped.action === 'killed')
      log.warn(`training: stopped a trainer left running by an earlier attempt (${reaped.action})`, { ...where, stale: reaped.found });
    if (reaped.action === 'other-host')
      log.warn('training: a trainer of another host may still run on this run directory', { ...where, stale: reaped.found });
    const problem = training.trainingNodeProblem(t);
    if (problem) throw configError(problem);
    if (mirror) log.info('training: pulled from the store', { ...where, ...(await mirror.pull()), runDir: input.runDir });

    const before = training.newestCheckpoint(input.runDir);
    const resumedFrom = before?.step ?? 0;
    type Outcome = Omit<training.SegmentResultFields, 'segment' | 'resumedFrom' | 'attempt' | 'startedAt'>;
    const result = (o: Outcome) =>
      training.segmentResult({ ...o, segment: input.segment, resumedFrom, attempt: context.info.attempt, startedAt });
    // With a store the result names the store's copies: the checkpoint's URI and the published metrics.
    const checkpointOf = (found: { step: number; path: string } | null) =>
      mirror?.checkpointUri(found?.step ?? null) ?? found?.path ?? null;
    const segmentMetrics = async (upTo: number) => {
      const written = await training.writeSegmentMetrics(input, upTo);
      if (!mirror) return written;
      await mirror.flush();
      return { ref: await mirror.publishSegmentMetrics(training.segmentMetricsPath(input.runDir, input.segment)), rows: written.rows };
    };
    if (resumedFrom >= input.targetStep) {
      // A previous attempt got there (its result was lost with its worker): nothing to train.
      const { ref, rows } = await segmentMetrics(resumedFrom);
      log.info('training: segment already done by an earlier attempt', { ...where, checkpointStep: resumedFrom });
      // The earlier attempt's trainer said what it ran (model size, device) in its start line; report that rather
      // than nothing, so a run whose last activity result was lost reports the same as one that was not.
      const earlier = training.segmentTrainerStarts(input.runDir, input.segment).at(-1);
      const trainer = { parameters: earlier?.parameters ?? null, device: earlier?.device ?? null };
      return result({
        step: resumedFrom,
        checkpoint: checkpointOf(before),
        stoppedBy: 'already-done',
        metrics: ref,
        rows,
        instances: 0,
        skipped: 0,
        ...trainer,
      });
    }

    const onServerError = (error: unknown, route: string) =>
      log.error('training: environment server error', { route, error: String(error) });
    // With a store, the samples' worktrees are this node's own, made from the run's repoSource.
    const worktrees = mirror
      ? await storeSync.materializeSampleWorktrees(input.samples.uri, {
          repoSource: parsed.store!.repoSource,
          dataDir: storeSync.nodeDataDir() ?? path.dirname(input.runDir),
          signal: context.cancellationSignal,
        })
      : null;
    if (worktrees && worktrees.failed.length > 0)
      log.warn(`training: ${worktrees.failed.length} worktrees could not be made on this node`, { first: worktrees.failed.slice(0, 3) });
    const setupInput = { ...input, samplesUri: input.samples.uri, ...(worktrees ? { worktreePath: worktrees.worktreePath } : {}) };
    const setup = await training.setUpSegment(setupInput, onServerError).catch((error: unknown) => {
      throw error instanceof training.NoTrainableSamplesError ? invalidInput(error.message) : error;
    });
    const { loaded, environment, server, files } = setup;
    if (loaded.skipped.length > 0)
      log.warn(`training: ${loaded.skipped.length} samples cannot be trained on`, { first: loaded.skipped.slice(0, 5) });
    if (t.smokeRun) log.warn('training: SMOKE RUN — a plumbing check, not a real training run; its metrics mean nothing', where);

    let run: training.TrainerRun;
    try {
      run = await training.runTrainer({
        python: t.python,
        args: training.trainerArgs(t, files.config),
        cwd: projectRoot,
        env: { ...process.env, PYTHONUNBUFFERED: '1' },
        files,
        pidFile: layout.pidFile,
        segment: input.segment,
        attempt: setup.attempt,
        targetStep: input.targetStep,
        totalSteps: input.totalSteps,
        initial: training.initialSegmentState(before),
        cancellation: context.cancellationSignal,
        graceMs: t.stopGraceMs,
        onStarted: (pid) => {
          log.info('training: trainer started', {
            ...where,
            pid,
            processes: t.gpus,
            envUrl: server.url,
            instances: loaded.instanceIds.length,
            resumeFrom: resumedFrom,
            logs: files.stdout,
          });
          progress.report(training.initialSegmentState(before), null);
        },
        onEvent: (outcome) => {
          progress.report(outcome.state, outcome.progress);
          mirror?.notify(); // a step line covers its checkpoint: the checkpoint's marker may go up now
        },
        onForceKill: () => log.warn(`training: the trainer did not exit within ${t.stopGraceMs} ms of SIGTERM; killing it`, where),
      });
    } catch (error) {
      if (error instanceof training.TrainerStartError) throw configError(`training.python: cannot start ${t.python}: ${error.message}`);
      throw error;
    } finally {
      await server.close();
    }
    const { exit, state } = run;
    // The last logs and checkpoint reach the store whatever the exit; a failed attempt's own error wins over the store's.
    if (mirror) {
      await mirror.flush().catch((error: unknown) => {
        if (exit.code === 0 && !run.protocolError) throw error;
        log.warn('training: the last push to the store failed', { ...where, error: String(error) });
      });
    }
    const stats = environment.stats();
    log.info('training: trainer exited', {
      ...where,
      exit,
      step: state.step,
      stopReason: run.stopReason,
      episodes: stats.opened,
      open: stats.open,
    });

    if (run.protocolError instanceof training.TrainerProtocolError) throw nonRetryable('TrainerProtocolError', run.protocolError.message);
    if (run.protocolError) throw run.protocolError;
    const cancelled = context.cancellationSignal.aborted;
    const cancelReason =
      context.cancellationSignal.reason instanceof CancelledFailure ? context.cancellationSignal.reason.message : 'CANCELLED';
    if (exit.code !== 0) {
      if (cancelled) throw new CancelledFailure(cancelReason);
      const failure = await training.trainerFailure(run, input.segment, files.stderr);
      throw ApplicationFailure.create({
        type: failure.permanent ? 'TrainerConfigError' : 'TrainerFailed',
        nonRetryable: failure.permanent,
        message: failure.message,
      });
    }

    const after = training.newestCheckpoint(input.runDir);
    const reached = after?.step ?? 0;
    if (after && reached !== state.step)
      log.warn('training: the newest checkpoint is not the step the trainer reported last', {
        ...where,
        checkpointStep: reached,
        reported: state.step,
      });
    const { ref, rows } = await segmentMetrics(reached);
    const stoppedBy = training.segmentStoppedBy(run);
    progress.report({ ...state, step: reached, checkpoint: after?.path ?? null, checkpointStep: after?.step ?? null }, 'now');
    // Not the workflow's request (worker shutdown, timeout): fail this attempt, the retry resumes from here.
    if (cancelled && cancelReason !== 'CANCELLED') throw new CancelledFailure(cancelReason);
    const counts = {
      instances: loaded.instanceIds.length,
      skipped: loaded.skipped.length,
      parameters: state.parameters,
      device: state.device,
    };
    return result({ step: reached, checkpoint: checkpointOf(after), stoppedBy, metrics: ref, rows, ...counts });
  } finally {
    clearInterval(keepAlive);
  }
}

/** What a training run left on disk: where a new workflow on the same run directory continues from. */
export async function inspectTrainingRun(input: {
  runDir: string;
  runId?: string;
  store?: string;
}): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  if (input.store) return storeSync.inspectStoredRun(input.store, input.runId ?? path.basename(input.runDir));
  const checkpoint = training.newestCheckpoint(input.runDir);
  const segments = training.listSegments(input.runDir);
  return {
    checkpointStep: checkpoint?.step ?? null,
    checkpoint: checkpoint?.path ?? null,
    lastSegment: segments.length > 0 ? segments[segments.length - 1]! : 0,
  };
}
