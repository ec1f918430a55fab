import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { openArtifactStore, storeSettingsFromEnv, type StoreSettings } from '../artifacts/store';
import * as storeSync from '../store-sync';
import type { TrainSegmentResult } from '../../schemas/training/activity-io';
import type { TrainSegmentInputSchema } from '../../schemas/training/activity-io';
import type { z } from 'zod';
import { newestCheckpoint } from './checkpoints';
import { TrainerProcessExitError } from './exit-error';
import { listSegments, segmentDir, trainingLayout } from './layout';
import { initialSegmentState } from './trainer-events';
import { reapStaleTrainer } from './trainer-pid-file';
import { runTrainer, TrainerStartError, type TrainerRun } from './run-trainer';
import { segmentResult, segmentStoppedBy, trainerFailure, trainingNodeProblem, type SegmentResultFields } from './segment-outcome';
import { setUpSegment } from './segment-setup';
import { localSegmentStorage, storeSegmentStorage, type SegmentStorage } from './segment-storage';
import { segmentTrainerStarts } from './trainer-starts';
import type { SegmentProgress } from './segment-progress';
import { trainerArgs } from './trainer-config';

type SegmentInput = z.infer<typeof TrainSegmentInputSchema>;

/** What the node or the config lacks (a missing python or model folder, a trainer that cannot start): retrying cannot help. */
export class SegmentConfigError extends Error {
  override readonly name = 'SegmentConfigError';
}

/** The trainer exited non-zero on its own; `permanent` when its stderr says no retry can fix it. */
export class TrainerExitError extends TrainerProcessExitError {
  override readonly name = 'TrainerExitError';
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
  /** This node's data dir (activities/kit/deps.ts): with a store, the segment trains in `<nodeDataDir>/<runId>`. */
  nodeDataDir: string | null;
  /** The environment the trainer starts with (the worker's, read once at start: CUDA, caches, HF_HOME). */
  env: Readonly<Record<string, string | undefined>>;
  cancellation: AbortSignal;
  progress: SegmentProgress;
  log: SegmentLog;
}

type Where = { segment: number; attempt: number; targetStep: number; totalSteps: number };

/**
 * Readies this node for the segment: opens its storage (the shared disk, or the run store), stops a trainer an
 * earlier attempt left running, checks the node can train, and pulls the run's state when it lives in the store.
 */
async function prepareSegment(parsed: SegmentInput, context: SegmentContext) {
  const { log } = context;
  const storage = parsed.store
    ? await storeSegmentStorage({
        store: parsed.store,
        runId: parsed.runId,
        runDir: parsed.runDir,
        nodeDataDir: context.nodeDataDir,
        storeSettings: storeSettingsFromEnv(context.env),
        segment: parsed.segment,
        attempt: context.attempt,
        startedAt: context.startedAt,
        keepCheckpoints: parsed.training.keepCheckpoints,
        onPushError: (error) => log.warn('training: a push to the store failed (the next one retries)', { error: String(error) }),
      })
    : localSegmentStorage(parsed.runDir);
  const input = { ...parsed, runDir: storage.runDir };
  const t = input.training;
  const layout = trainingLayout(input.runDir);
  await mkdir(segmentDir(input.runDir, input.segment), { recursive: true });
  await mkdir(layout.trainerOutput, { recursive: true });
  const where: Where = { segment: input.segment, attempt: context.attempt, targetStep: input.targetStep, totalSteps: input.totalSteps };

  const reaped = await reapStaleTrainer(layout.pidFile, t.stopGraceMs);
  if (reaped.action === 'terminated' || reaped.action === 'killed') {
    log.warn(`training: stopped a trainer left running by an earlier attempt (${reaped.action})`, { ...where, stale: reaped.found });
  }
  if (reaped.action === 'other-host')
    log.warn('training: a trainer of another host may still run on this run directory', { ...where, stale: reaped.found });
  const problem = trainingNodeProblem(t);
  if (problem) throw new SegmentConfigError(problem);
  const pulled = await storage.pull();
  if (pulled) log.info('training: pulled from the store', { ...where, ...pulled, runDir: input.runDir });
  return { storage, input, layout, where };
}

/** Turns a trainer's end that is not a success into the segment's error (see runTrainingSegment's list). */
async function throwIfTrainerFailed(
  run: TrainerRun,
  where: Where,
  paths: { pidFile: string; stderr: string },
  context: SegmentContext,
): Promise<void> {
  const { segment } = where;
  if (run.unkillable) {
    const { pid, description } = run.unkillable;
    context.log.error('training: the trainer did not exit after SIGKILL; giving up on it', { ...where, pid, description });
    throw new TrainerUnkillableError(
      `the trainer of segment ${segment} (pid ${pid}) did not exit after SIGTERM and SIGKILL (${description}); ` +
        `this attempt releases its slot. The process may keep the accelerator until the node is rebooted; ` +
        `its record stays in ${paths.pidFile} so the next attempt on this node tries to stop it again.`,
    );
  }
  if (run.protocolError) throw run.protocolError;
  if (run.exit.code !== 0) {
    if (context.cancellation.aborted) throw new SegmentCancelledError(`the trainer of segment ${segment} was stopped by a cancellation`);
    const failure = await trainerFailure(run, segment, paths.stderr);
    throw new TrainerExitError(failure.message, failure.permanent);
  }
}

/** Runs the trainer against the segment's environment server until it exits; the server is closed after. */
async function launchTrainer(options: {
  input: SegmentInput;
  context: SegmentContext;
  storage: SegmentStorage;
  setup: Awaited<ReturnType<typeof setUpSegment>>;
  before: ReturnType<typeof newestCheckpoint>;
  where: Where;
  pidFile: string;
}): Promise<TrainerRun> {
  const { input, context, storage, before, where } = options;
  const { log, progress } = context;
  const { loaded, server, files, attempt: fileAttempt } = options.setup;
  const t = input.training;
  const resumedFrom = before?.step ?? 0;
  try {
    return await runTrainer({
      python: t.python,
      args: trainerArgs(t, files.config),
      cwd: context.projectRoot,
      env: { ...context.env, PYTHONUNBUFFERED: '1' },
      files,
      pidFile: options.pidFile,
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
        storage.stepReported();
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
    try {
      await server.close();
    } finally {
      await options.setup.hold.release();
    }
  }
}

/** Loads the segment's samples (on this node's own worktrees with a store) and serves their environment on loopback. */
async function serveEnvironment(input: SegmentInput, storage: SegmentStorage, context: SegmentContext, where: Where) {
  const { log } = context;
  // With a store, the samples' worktrees are this node's own, made from the run's repoSource.
  const worktrees = await storage.sampleWorktrees(input.samples.uri, context.cancellation);
  if (worktrees && worktrees.failed.length > 0) {
    log.warn(`training: ${worktrees.failed.length} worktrees could not be made on this node`, { first: worktrees.failed.slice(0, 3) });
  }
  const onServerError = (error: unknown, route: string) => log.error('training: environment server error', { route, error: String(error) });
  const setupInput = {
    ...input,
    samplesUri: input.samples.uri,
    storeSettings: storeSettingsFromEnv(context.env),
    ...(worktrees ? { worktreePath: worktrees.worktreePath } : {}),
  };
  const setup = await setUpSegment(setupInput, onServerError);
  const { loaded } = setup;
  if (loaded.skipped.length > 0)
    log.warn(`training: ${loaded.skipped.length} samples cannot be trained on`, { first: loaded.skipped.slice(0, 5) });
  if (input.training.smokeRun) log.warn('training: SMOKE RUN — a plumbing check, not a real training run; its metrics mean nothing', where);
  return setup;
}

/**
 * One training segment on this node (docs/design.md "Training", "Temporal conventions"): resumes from the newest complete checkpoint (after
 * stopping a trainer an earlier attempt left running), serves the environment on loopback, runs the trainer
 * until `targetStep`, and writes the segment's steps once each to `training/metrics/segment-<k>.parquet`.
 *
 * Where the run's state lives, the shared disk or the run store (README "Deployment: several machines"), is the
 * SegmentStorage's business (segment-storage.ts): with a store the node works in its own run dir, makes the
 * samples' worktrees itself, pulls before and pushes as it goes, and the result names the store's copies.
 *
 * Errors: SegmentConfigError, NoTrainableSamplesError, TrainerProtocolError, TrainerExitError,
 * TrainerUnkillableError, SegmentCancelledError; the activity maps them to Temporal failures.
 */
export async function runTrainingSegment(parsed: SegmentInput, context: SegmentContext): Promise<TrainSegmentResult> {
  const { log, progress } = context;
  const { storage, input, layout, where } = await prepareSegment(parsed, context);

  const before = newestCheckpoint(input.runDir);
  const resumedFrom = before?.step ?? 0;
  type Outcome = Omit<SegmentResultFields, 'segment' | 'resumedFrom' | 'attempt' | 'startedAt'>;
  const result = (o: Outcome) =>
    segmentResult({ ...o, segment: input.segment, resumedFrom, attempt: context.attempt, startedAt: context.startedAt });
  // With a store the result names the store's copies: the checkpoint's URI and the published metrics.
  const segmentMetrics = (upTo: number) => storage.segmentMetrics(input, upTo);
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
      checkpoint: storage.checkpointRef(before),
      stoppedBy: 'already-done',
      metrics: ref,
      rows,
      instances: 0,
      skipped: 0,
      ...trainer,
    });
  }

  const setup = await serveEnvironment(input, storage, context, where);
  const { loaded, environment, files } = setup;

  const run = await launchTrainer({ input, context, storage, setup, before, where, pidFile: layout.pidFile });
  const { exit, state } = run;
  // The last logs and checkpoint reach the store whatever the exit; a failed attempt's own error wins over the store's.
  await storage.finish().catch((error: unknown) => {
    if (exit.code === 0 && !run.protocolError) throw error;
    log.warn('training: the last push to the store failed', { ...where, error: String(error) });
  });
  const stats = environment.stats();
  log.info('training: trainer exited', {
    ...where,
    exit,
    step: state.step,
    stopReason: run.stopReason,
    episodes: stats.opened,
    open: stats.open,
  });

  await throwIfTrainerFailed(run, where, { pidFile: layout.pidFile, stderr: files.stderr }, context);

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
  return result({
    step: reached,
    checkpoint: storage.checkpointRef(after),
    stoppedBy: segmentStoppedBy(run),
    metrics: ref,
    rows,
    ...counts,
  });
}

/**
 * What a training run left (on this node's disk, or in the run store, reached with `storeSettings`): where a new
 * workflow continues from.
 */
export async function inspectRun(
  input: { runDir: string; runId?: string; store?: string },
  storeSettings: StoreSettings,
): Promise<{ checkpointStep: number | null; checkpoint: string | null; lastSegment: number }> {
  if (input.store)
    return storeSync.inspectStoredRun(openArtifactStore(input.store, storeSettings.s3), input.runId ?? path.basename(input.runDir));
  const checkpoint = newestCheckpoint(input.runDir);
  const segments = listSegments(input.runDir);
  return { checkpointStep: checkpoint?.step ?? null, checkpoint: checkpoint?.path ?? null, lastSegment: segments.at(-1) ?? 0 };
}
