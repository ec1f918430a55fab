import { LineTail, startProcessGroup, type UnkillableProcess } from '../process';
import { applyTrainerEvent, type SegmentState, type TrainerEventOutcome } from './trainer-events';
import { removePidFile, writePidFile } from './trainer-pid-file';

const POLL_MS = 250;

/** Why the segment stopped its trainer: its target step, a cancellation, or a line breaking the trainer's contract. */
export type TrainerStopReason = 'target' | 'cancelled' | 'protocol';

export interface RunTrainerOptions {
  python: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The attempt's files: stdout is read back line by line as the trainer writes it. */
  files: { stdout: string; stderr: string };
  pidFile: string;
  /** The segment and the attempt number of the files, for the pid record and the metrics rows. */
  segment: number;
  attempt: number;
  targetStep: number;
  totalSteps: number;
  /** Where the segment resumes (see initialSegmentState). */
  initial: SegmentState;
  /** The activity's cancellation: the trainer gets SIGTERM (it checkpoints), then SIGKILL after graceMs. */
  cancellation: AbortSignal;
  graceMs: number;
  onStarted(pid: number): void;
  /** After each line that moved the step or the checkpoint, with the state it left. */
  onEvent(outcome: TrainerEventOutcome): void;
  onForceKill(): void;
  /** How long the trainer may take to die after SIGKILL before the segment stops waiting for it (default 10 s). */
  killWaitMs?: number;
}

export interface TrainerRun {
  exit: { code: number | null; signal: NodeJS.Signals | null };
  /** Set when SIGKILL did not end the trainer (uninterruptible sleep): the segment stopped waiting for it. */
  unkillable: UnkillableProcess | null;
  state: SegmentState;
  stopReason: TrainerStopReason | null;
  /** The first TrainerProtocolError a line raised (the trainer was stopped for it). */
  protocolError: unknown;
}

/** The trainer could not be started (no such Python, no permission). */
export class TrainerStartError extends Error {
  override readonly name = 'TrainerStartError';
}

/**
 * The trainer of one segment attempt, from start to exit: started in its own process group with its output in
 * files (so it outlives a killed worker and is reaped by the next attempt through the pid file), its stdout
 * followed through applyTrainerEvent, stopped at the target step, on cancellation or on a broken line.
 */
export async function runTrainer(options: RunTrainerOptions): Promise<TrainerRun> {
  const trainer = startProcessGroup(options.python, options.args, {
    cwd: options.cwd,
    env: options.env,
    stdout: { file: options.files.stdout },
    stderr: { file: options.files.stderr },
    graceMs: options.graceMs,
    onForceKill: () => options.onForceKill(),
    ...(options.killWaitMs === undefined ? {} : { killWaitMs: options.killWaitMs }),
  });
  try {
    await trainer.spawned;
  } catch (error) {
    throw new TrainerStartError((error as Error).message);
  }
  const pid = trainer.pid!;
  await writePidFile(options.pidFile, pid, { segment: options.segment, attempt: options.attempt });
  options.onStarted(pid);

  let state = options.initial;
  let protocolError: unknown = null;
  const onAbort = () => trainer.stop('cancelled');
  if (options.cancellation.aborted) onAbort();
  else options.cancellation.addEventListener('abort', onAbort, { once: true });

  const tail = new LineTail(options.files.stdout);
  const readLines = async (final: boolean) => {
    for (const { line, text } of await tail.read(final)) {
      try {
        const outcome = applyTrainerEvent(
          state,
          { text, line, file: options.files.stdout, segment: options.segment, attempt: options.attempt },
          options,
        );
        state = outcome.state;
        if (outcome.heartbeat || outcome.progress) options.onEvent(outcome);
        if (outcome.targetReached) trainer.stop('target');
      } catch (error) {
        protocolError ??= error;
        trainer.stop('protocol');
      }
    }
  };
  let exit: TrainerRun['exit'] | null = null;
  let unkillable: UnkillableProcess | null = null;
  void trainer.exited.then((exited) => {
    unkillable = exited.unkillable ?? null;
    exit = { code: exited.code, signal: exited.signal };
  });
  try {
    while (exit === null) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      await readLines(false);
    }
    await readLines(true);
  } finally {
    options.cancellation.removeEventListener('abort', onAbort);
    // An unkillable trainer still runs: its record stays, so the next attempt on this node tries to reap it again.
    if (unkillable === null) await removePidFile(options.pidFile);
  }
  return {
    exit: exit as TrainerRun['exit'],
    unkillable,
    state,
    stopReason: trainer.stoppedFor as TrainerStopReason | null,
    protocolError,
  };
}
