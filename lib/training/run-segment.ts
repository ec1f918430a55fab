import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import * as storeSync from '../store-sync';
import type { TrainSegmentResult } from '../../schemas/training/activity-io';
import type { TrainSegmentInputSchema } from '../../schemas/training/activity-io';
import type { z } from 'zod';
import { newestCheckpoint } from './checkpoints';
import { listSegments, segmentDir, segmentMetricsPath, trainingLayout } from './layout';
import { initialSegmentState } from './trainer-events';
import { reapStaleTrainer } from './trainer-pid-file';
import { runTrainer, TrainerStartError, type TrainerRun } from './run-trainer';
import { segmentResult, segmentStoppedBy, trainerFailure, trainingNodeProblem, type SegmentResultFields } from './segment-outcome';
import { writeSegmentMetrics } from './segment-metrics';
import { setUpSegment } from './segment-setup';
import { segmentTrainerStarts } from './trainer-starts';
import type { SegmentProgress } from './segment-progress';
import { trainerArgs } from './trainer-config';

type SegmentInput = z.infer<typeof TrainSegmentInputSchema>;

/** What the node or the config lacks (a missing python or model folder, a trainer that cannot start): retrying cannot help. */
export class SegmentConfigError extends Error {
  override readonly name = 'SegmentConfigError';
}

/** The trainer exited non-zero on its own; `permanent` when its stderr says no retry can fix it. */
export class TrainerExitError extends Error {
  override readonly name = 'TrainerExitError';
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

/**
 * SIGKILL did not end the trainer (a process in uninterruptible sleep, stuck in a driver or file system call):
 * the attempt gives up its slot rather than wait for a process that may never exit. A retry may run elsewhere;
 * on this node the stuck process may hold the accelerator until the node is rebooted.
 */
export class TrainerUnkillableError extends Error {
  override readonly name = 'TrainerUnkillableError';
}

/** The trainer was stopped by the cancellation and exited non-zero: the attempt is cancelled, not failed. */
export class SegmentCancelledError extends Error {
  override readonly name = 'SegmentCancelledError';
}

export interface SegmentLog {
  info(message: string, meta?: Record<string, unknown>): void;
  warn(message: string, meta?: Record<string, unknown>): void;
  error(message: string, meta?: Record<string, unknown>): void;
}

export interface SegmentContext {
  attempt: number;
  startedAt: number;
  /** Where `python -m trainer.train` runs (the project root, so the `trainer` package imports). */
  projectRoot: string;
  cancellation: AbortSignal;
  progress: SegmentProgress;
  log: SegmentLog;
}

/**
 * One training segment on this node (docs/design.md "Training", "Temporal conventions"): resumes from the newest complete checkpoint (after
 * stopping a trainer an earlier attempt left running), serves the environment on loopback, runs the trainer
 * until `targetStep`, and writes the segment's steps once each to `training/metrics/segment-<k>.parquet`.
 *
 * With a run store (README "Deployment: several machines") the node works in its own run dir (CODEGREP_DATA_DIR/<runId>), makes the
 * samples' worktrees itself, pulls the store's newest checkpoint and this segment's earlier logs first, pushes
 * each checkpoint as the trainer reports it, and the result names the store's copies.
 *
 * Errors: SegmentConfigError, NoTrainableSamplesError, TrainerProtocolError, TrainerExitError,
 * TrainerUnkillableError, SegmentCancelledError; the activity maps them to Temporal failures.
 */
export async function runTrainingSegment(parsed: SegmentInput, context: SegmentContext): Promise<TrainSegmentResult> {
  const { log, progress } = context;
  const mirror = parsed.store
    ? await storeSync.openSegmentMirror({
        store: parsed.store.uri,
        runId: parsed.runId,
        segment: parsed.segment,
        attempt: context.attempt,
        startedAt: context.startedAt,
        keepCheckpoints: parsed.training.keepCheckpoints,
        localRunDir: storeSync.nodeRunDir(parsed.runDir, parsed.runId),
        onPushError: (error) => log.warn('training: a push to the store failed (the next one retries)', { error: String(error) }),
      })
    : null;
  const input = mirror ? { ...parsed, runDir: mirror.localRunDir } : parsed;
  const t = input.training;
  const layout = trainingLayout(input.runDir);
  await mkdir(segmentDir(input.runDir, input.segment), { recursive: true });
  await mkdir(layout.trainerOutput, { recursive: true });
  const where = { segment: input.segment, attempt: context.attempt, targetStep: input.targetStep, totalSteps: input.totalSteps };

  const reaped = await reapStaleTrainer(layout.pidFile, t.stopGraceMs);
  if (reaped.action === 'terminated' || reaped.action === 'killed') {
    log.warn(`training: stopped a trainer left running by an earlier attempt (${reaped.action})`, { ...where, stale: reaped.found });
  }
  if (reaped.action === 'other-host')
    log.warn('training: a trainer of another host may still run on this run directory', { ...where, stale: reaped.found });
  const problem = trainingNodeProblem(t);
  if (problem) throw new SegmentConfigError(problem);
  if (mirror) log.info('training: pulled from the store', { ...where, ...(await mirror.pull()), runDir: input.runDir });

  const before = newestCheckpoint(input.runDir);
  const resumedFrom = before?.step ?? 0;
  type Outcome = Omit<SegmentResultFields, 'segment' | 'resumedFrom' | 'attempt' | 'startedAt'>;
  const result = (o: Outcome) =>
    segmentResult({ ...o, segment: input.segment, resumedFrom, attempt: context.attempt, startedAt: context.startedAt });
  // With a store the result names the store's copies: the checkpoint's URI and the published metrics.
  const checkpointOf = (found: { step: number; path: string } | null) => mirror?.checkpointUri(found?.step ?? null) ?? found?.path ?? null;
  const segmentMetrics = async (upTo: number) => {
    const written = await writeSegmentMetrics(input, upTo);
    if (!mirror) return written;
    await mirror.flush();
    return { ref: await mirror.publishSegmentMetrics(segmentMetricsPath(input.runDir, input.segment)), rows: written.rows };
  };
  if (resumedFrom >= input.targetStep) {
    // A previous attempt got there (its result was lost with its worker): nothing to train.
    const { ref, rows } = await segmentMetrics(resumedFrom);
    log.info('training: segment already done by an earlier attempt', { ...where, checkpointStep: resumedFrom });
    // The earlier attempt's trainer said what it ran (model size, device) in its start line; report that rather
    // than nothing, so a run whose last activity result was lost reports the same as one that was not.
    const earlier = segmentTrainerStarts(input.runDir, input.segment).at(-1);
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

  // With a store, the samples' worktrees are this node's own, made from the run's repoSource.
  const worktrees =
    mirror && parsed.store
      ? await storeSync.materializeSampleWorktrees(input.samples.uri, {
          repoSource: parsed.store.repoSource,
          dataDir: storeSync.nodeDataDir() ?? path.dirname(input.runDir),
          signal: context.cancellation,
        })
      : null;
  if (worktrees && worktrees.failed.length > 0) {
    log.warn(`training: ${worktrees.failed.length} worktrees could not be made on this node`, { first: worktrees.failed.slice(0, 3) });
  }
  const onServerError = (error: unknown, route: string) => log.error('training: environment server error', { route, error: String(error) });
  const setupInput = { ...input, samplesUri: input.samples.uri, ...(worktrees ? { worktreePath: worktrees.worktreePath } : {}) };
  const { loaded, environment, server, files, attempt: fileAttempt } = await setUpSegment(setupInput, onServerError);
  if (loaded.skipped.length > 0)
    log.warn(`training: ${loaded.skipped.length} samples cannot be trained on`, { first: loaded.skipped.slice(0, 5) });
  if (t.smokeRun) log.warn('training: SMOKE RUN — a plumbing check, not a real training run; its metrics mean nothing', where);

  let run: TrainerRun;
  try {
    run = await runTrainer({
      python: t.python,
      args: trainerArgs(t, files.config),
      cwd: context.projectRoot,
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      files,
      pidFile: layout.pidFile,
      segment: input.segment,
      attempt: fileAttempt,
      targetStep: input.targetStep,
      totalSteps: input.totalSteps,
      initial: initialSegmentState(before),
      cancellation: context.cancellation,
      graceMs: t.stopGraceMs,
      onStarted: (pid) => {
        const started = {
          pid,
          processes: t.gpus,
          envUrl: server.url,
          instances: loaded.instanceIds.length,
          resumeFrom: resumedFrom,
          logs: files.stdout,
        };
        log.info('training: trainer started', { ...where, ...started });
        progress.report(initialSegmentState(before), null);
      },
      onEvent: (outcome) => {
        progress.report(outcome.state, outcome.progress);
        mirror?.notify(); // a step line covers its checkpoint: the checkpoint's marker may go up now
      },
      // Runs from a timer, possibly started by the cancellation outside the activity's async context: `log` must be
      // the logger captured while the activity was live (activities/training.ts), never a context lookup.
      onForceKill: () =>
        log.warn(`training: the trainer did not exit within ${t.stopGraceMs} ms of SIGTERM; killing its process group`, where),
    });
  } catch (error) {
    if (error instanceof TrainerStartError) throw new SegmentConfigError(`training.python: cannot start ${t.python}: ${error.message}`);
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

  if (run.unkillable) {
    const { pid, description } = run.unkillable;
    log.error('training: the trainer did not exit after SIGKILL; giving up on it', { ...where, pid, description });
    throw new TrainerUnkillableError(
      `the trainer of segment ${input.segment} (pid ${pid}) did not exit after SIGTERM and SIGKILL (${description}); ` +
        `this attempt releases its slot. The process may keep the accelerator until the node is rebooted; ` +
        `its record stays in ${layout.pidFile} so the next attempt on this node tries to stop it again.`,
    );
  }
  if (run.protocolError) throw run.protocolError;
  if (exit.code !== 0) {
    if (context.cancellation.aborted)
      throw new SegmentCancelledError(`the trainer of segment ${input.segment} was stopped by a cancellation`);
    const failure = await trainerFailure(run, input.segment, files.stderr);
    throw new TrainerExitError(failure.message, failure.permanent);
  }

  const after = newestCheckpoint(input.runDir);
  const reached = after?.step ?? 0;
  if (after && reached !== state.step) {
    log.warn('training: the newest checkpoint is not the step the trainer reported last', {
      ...where,
      checkpointStep: reached,
      reported: state.step,
    });
  }
  const { ref, rows } = await segmentMetrics(reached);
  progress.report({ ...state, step: reached, checkpoint: after?.path ?? null, checkpointStep: after?.step ?? null }, 'now');
  const counts = {
    instances: loaded.instanceIds.length,
    skipped: loaded.skipped.length,
    parameters: state.parameters,
    device: state.device,
  };
  return result({ step: reached, checkpoint: checkpointOf(after), stoppedBy: segmentStoppedBy(run), metrics: ref, rows, ...counts });
}

/** What a training run left (on this node's disk, or in the run store): where a new workflow continues from. */
export async function inspectRun(input: {
  runDir: string;
  runId?: string;
  store?: string;
}): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  if (input.store) return storeSync.inspectStoredRun(input.store, input.runId ?? path.basename(input.runDir));
  const checkpoint = newestCheckpoint(input.runDir);
  const segments = listSegments(input.runDir);
  return { checkpointStep: checkpoint?.step ?? null, checkpoint: checkpoint?.path ?? null, lastSegment: segments.at(-1) ?? 0 };
}
