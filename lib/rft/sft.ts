import { existsSync, readdirSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { hashConfig, writeBytesAtomically, writeParquetArtifact } from '../artifacts';
import { LineTail, startProcessGroup } from '../process';
import { TrainerProcessExitError } from '../training/exit-error';
import { reapStaleTrainer, removePidFile, writePidFile } from '../training/trainer-pid-file';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { RFT_SCHEMA_VERSION, RFT_SFT_METRICS_SCHEMA_NAME, rftSftStepColumns, type RftSft, type RftSftStepRow } from '../../schemas/rft';
import { rftLayout } from './sample-shard';

/**
 * RFT's fine-tune (CodeScout §4.1: SFT of the student on the kept trajectories) as one resumable run of
 * `python -m trainer.sft --config CONFIG --resume latest`, with the training segment's process discipline
 * (lib/training/run-segment.ts): the trainer runs in its own process group writing to files, so a killed worker
 * leaves it recording; the next attempt reaps it through the pid file (SIGTERM: it checkpoints and exits) and
 * resumes from its newest complete checkpoint, so no optimizer step is done twice. A finished fine-tune leaves
 * `done.json`, and a rerun with the same inputs returns it without starting the trainer.
 *
 *     <runDir>/rft/sft/
 *       examples.jsonl        the kept trajectories (lib/rft/collect.ts)
 *       config.json           trainer.sft's config
 *       trainer/              its output_dir: checkpoints/step-NNNNNNNN/ (COMPLETE marker)
 *       attempts/attempt-NN.stdout.jsonl, attempt-NN.stderr.log
 *       tokens.jsonl          tokens_out: every example's token ids and policy mask
 *       metrics.parquet       each optimizer step once
 *       sft.pid.json          the running trainer, for the next attempt to reap
 *       done.json             the finished fine-tune's checkpoint and config hash
 */
export function sftLayout(runDir: string) {
  const root = rftLayout(runDir).sft;
  return {
    root,
    examples: path.join(root, 'examples.jsonl'),
    config: path.join(root, 'config.json'),
    output: path.join(root, 'trainer'),
    checkpoints: path.join(root, 'trainer', 'checkpoints'),
    attempts: path.join(root, 'attempts'),
    tokens: path.join(root, 'tokens.jsonl'),
    metrics: path.join(root, 'metrics.parquet'),
    pidFile: path.join(root, 'sft.pid.json'),
    done: path.join(root, 'done.json'),
  };
}

export class SftConfigError extends Error {
  override readonly name = 'SftConfigError';
}
/** trainer.sft exited non-zero or stopped early on its own; `permanent` when no retry can fix it. */
export class SftExitError extends TrainerProcessExitError {
  override readonly name = 'SftExitError';
}
export class SftCancelledError extends Error {
  override readonly name = 'SftCancelledError';
}

/** trainer.sft's config (LEARN_TASK contract): keys the rft section leaves out are not written, so the `rft` preset applies. */
export function sftTrainerConfig(
  sft: RftSft,
  run: { modelDir: string; recipe: string; layout: ReturnType<typeof sftLayout> },
): Record<string, unknown> {
  const optional: Record<string, unknown> = {
    finetune: sft.finetune,
    lora: sft.lora,
    lr: sft.lr,
    lr_schedule: sft.lrSchedule,
    warmup_ratio: sft.warmupRatio,
    epochs: sft.epochs,
    global_batch_size: sft.globalBatchSize,
    save_every: sft.saveEvery,
    keep_checkpoints: sft.keepCheckpoints,
  };
  return {
    ...sft.trainer,
    model_dir: run.modelDir,
    output_dir: run.layout.output,
    examples_path: run.layout.examples,
    tokens_out: run.layout.tokens,
    seed: sft.seed,
    recipe: run.recipe,
    ...Object.fromEntries(Object.entries(optional).filter(([, value]) => value !== undefined)),
  };
}

/** The complete checkpoints of the fine-tune (`step-N/` with trainer/checkpoint.py's COMPLETE marker), oldest first. */
export function sftCheckpoints(runDir: string): { step: number; path: string }[] {
  const dir = sftLayout(runDir).checkpoints;
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((name) => ({ name, match: /^step-(\d+)$/.exec(name) }))
    .filter(({ name, match }) => match && existsSync(path.join(dir, name, 'COMPLETE')))
    .map(({ name, match }) => ({ step: Number(match![1]), path: path.join(dir, name) }))
    .sort((a, b) => a.step - b.step);
}

interface SftLine {
  event: string;
  step?: number;
  loss?: number;
  lr?: number;
  path?: string;
}

function parseLine(text: string): SftLine | null {
  try {
    const value = JSON.parse(text) as unknown;
    return value && typeof value === 'object' && typeof (value as SftLine).event === 'string' ? (value as SftLine) : null;
  } catch {
    return null; // a library printing to stdout
  }
}

/** Every step line of every attempt, once per step: the newest attempt's line wins (it redid what a kill lost). */
export async function sftStepRows(runDir: string): Promise<RftSftStepRow[]> {
  const dir = sftLayout(runDir).attempts;
  const byStep = new Map<number, RftSftStepRow>();
  if (!existsSync(dir)) return [];
  for (const name of readdirSync(dir).sort()) {
    const match = /^attempt-(\d+)\.stdout\.jsonl$/.exec(name);
    if (!match) continue;
    for (const text of (await readFile(path.join(dir, name), 'utf8')).split('\n')) {
      const line = parseLine(text);
      if (line?.event !== 'step' || typeof line.step !== 'number') continue;
      if (typeof line.loss !== 'number') throw new SftExitError(`${name}: a step line without a numeric loss: ${text.slice(0, 200)}`, true);
      byStep.set(line.step, {
        step: line.step,
        loss: line.loss,
        lr: typeof line.lr === 'number' ? line.lr : null,
        attempt: Number(match[1]),
      });
    }
  }
  return [...byStep.values()].sort((a, b) => a.step - b.step);
}

function nextAttempt(dir: string): number {
  const taken = existsSync(dir)
    ? readdirSync(dir)
        .map((n) => /^attempt-(\d+)\./.exec(n))
        .filter((m): m is RegExpExecArray => m !== null)
        .map((m) => Number(m[1]))
    : [];
  return taken.length === 0 ? 1 : Math.max(...taken) + 1;
}

export interface SftContext {
  /** Where `python -m trainer.sft` runs (the project root). */
  projectRoot: string;
  /** The environment trainer.sft starts with (the worker's, read once at start: CUDA, caches, HF_HOME). */
  env: Readonly<Record<string, string | undefined>>;
  cancellation: AbortSignal;
  onProgress(progress: { step: number; checkpointStep: number | null }): void;
  log: { info(message: string, meta?: Record<string, unknown>): void; warn(message: string, meta?: Record<string, unknown>): void };
}

export interface SftRunInput {
  runDir: string;
  sampled: ArtifactRef;
  sft: RftSft;
  modelDir: string;
  python: string;
  recipe: string;
}

export interface SftRunResult {
  checkpoint: string;
  steps: number;
  metrics: ArtifactRef;
  tokensPath: string;
  cached: boolean;
  attempts: number;
}

const PERMANENT_ERRORS = [/ConfigError/, /refusing to resume/, /No module named '?trainer/, /unknown key/i];

/** Runs (or resumes, or finds finished) the fine-tune; see sftLayout. */
export async function runSft(input: SftRunInput, context: SftContext): Promise<SftRunResult> {
  const layout = sftLayout(input.runDir);
  await mkdir(layout.attempts, { recursive: true });
  const config = sftTrainerConfig(input.sft, { modelDir: input.modelDir, recipe: input.recipe, layout });
  const configHash = hashConfig({ config, sampled: input.sampled.sha256 });

  const reaped = await reapStaleTrainer(layout.pidFile, input.sft.stopGraceMs);
  if (reaped.action === 'terminated' || reaped.action === 'killed')
    context.log.warn(`rft: stopped a trainer.sft left running by an earlier attempt (${reaped.action})`, { stale: reaped.found });

  const doneBefore = await readDone(layout.done);
  if (doneBefore?.configHash === configHash && existsSync(path.join(doneBefore.checkpoint, 'COMPLETE')) && existsSync(layout.tokens)) {
    context.log.info('rft: the fine-tune is already done', { checkpoint: doneBefore.checkpoint });
    return { ...doneBefore.result, cached: true };
  }
  await discardOtherConfig(layout, configHash, context);
  if (!existsSync(input.python))
    throw new SftConfigError(`training.python: ${input.python} does not exist (run scripts/setup-python.sh on this node)`);
  if (!existsSync(path.join(input.modelDir, 'config.json')))
    throw new SftConfigError(`rft.sft.modelDir: ${input.modelDir} is not a local model directory (no config.json)`);
  // trainer.sft's config, with the hash beside it (the trainer reads a copy without it: unknown keys are errors).
  await writeFile(layout.config, JSON.stringify({ configHash, config }, null, 2) + '\n');
  const attempt = nextAttempt(layout.attempts);
  const stem = path.join(layout.attempts, `attempt-${String(attempt).padStart(2, '0')}`);
  const files = { config: `${stem}.config.json`, stdout: `${stem}.stdout.jsonl`, stderr: `${stem}.stderr.log` };
  await writeFile(files.config, JSON.stringify(config, null, 2) + '\n');

  const resumeFrom = sftCheckpoints(input.runDir).at(-1) ?? null;
  const trainer = await startSftTrainer(input, context, files);
  await writePidFile(layout.pidFile, trainer.pid!, { segment: 0, attempt });
  context.log.info('rft: trainer.sft started', { pid: trainer.pid, attempt, resumeFrom: resumeFrom?.step ?? 0, logs: files.stdout });

  const outcome = await followSftTrainer(trainer, files, layout, context, resumeFrom?.step ?? null);
  await throwUnlessDone(outcome, files, context);
  return recordFinishedSft(input, layout, configHash, attempt);
}

/** Checkpoints of another config (other examples, other settings) must not be resumed from: they are removed. */
async function discardOtherConfig(layout: ReturnType<typeof sftLayout>, configHash: string, context: SftContext): Promise<void> {
  const previous = await readFile(layout.config, 'utf8').then(
    (text) => (JSON.parse(text) as { configHash?: string }).configHash,
    () => undefined,
  );
  if (previous !== undefined && previous !== configHash) {
    context.log.warn('rft: the fine-tune config changed; starting it afresh', { previous, configHash });
    await rm(layout.output, { recursive: true, force: true });
    await rm(layout.tokens, { force: true });
  }
}

/** An attempt's files: the config it ran with, its stdout (the event lines) and its stderr. */
interface AttemptFiles {
  config: string;
  stdout: string;
  stderr: string;
}

type SftTrainer = ReturnType<typeof startProcessGroup>;
type SftExit = Awaited<SftTrainer['exited']>;

/** Starts `python -m trainer.sft` in its own process group; a python that cannot start is a config error. */
async function startSftTrainer(input: SftRunInput, context: SftContext, files: AttemptFiles): Promise<SftTrainer> {
  const trainer = startProcessGroup(input.python, ['-m', 'trainer.sft', '--config', files.config, '--resume', 'latest'], {
    cwd: context.projectRoot,
    env: { ...context.env, PYTHONUNBUFFERED: '1' },
    stdout: { file: files.stdout },
    stderr: { file: files.stderr },
    graceMs: input.sft.stopGraceMs,
    onForceKill: () => context.log.warn(`rft: trainer.sft did not exit within ${input.sft.stopGraceMs} ms of SIGTERM; killing it`),
  });
  try {
    await trainer.spawned;
  } catch (error) {
    throw new SftConfigError(`cannot start ${input.python}: ${(error as Error).message}`);
  }
  return trainer;
}

interface SftOutcome {
  exited: SftExit;
  /** The last step reported. */
  step: number;
  /** trainer.sft's last word: `done` (every step) or `stopped` (a SIGTERM: it checkpointed and exited 0). */
  finished: 'done' | 'stopped' | null;
}

/**
 * Follows trainer.sft's event lines until it exits, reporting its step and newest checkpoint; a cancellation stops
 * it. The pid file goes once it has exited (not when it could not be killed: the next attempt reaps it).
 */
async function followSftTrainer(
  trainer: SftTrainer,
  files: AttemptFiles,
  layout: ReturnType<typeof sftLayout>,
  context: SftContext,
  resumedStep: number | null,
): Promise<SftOutcome> {
  let step = resumedStep ?? 0;
  let checkpointStep = resumedStep;
  let finished: SftOutcome['finished'] = null;
  context.onProgress({ step, checkpointStep });
  const onAbort = () => trainer.stop('cancelled');
  if (context.cancellation.aborted) onAbort();
  else context.cancellation.addEventListener('abort', onAbort, { once: true });
  const tail = new LineTail(files.stdout);
  const follow = async (final: boolean) => {
    for (const { text } of await tail.read(final)) {
      const line = parseLine(text);
      if (!line || typeof line.step !== 'number') continue;
      if (line.event === 'done' || line.event === 'stopped') finished = line.event;
      if (line.event === 'step') step = line.step;
      if (line.event === 'checkpoint' || line.event === 'resumed') checkpointStep = line.step;
      if (['step', 'checkpoint', 'resumed'].includes(line.event)) context.onProgress({ step, checkpointStep });
    }
  };
  let exit: SftExit | null = null;
  void trainer.exited.then((e) => (exit = e));
  try {
    while (exit === null) {
      await new Promise((r) => setTimeout(r, 250));
      await follow(false);
    }
    await follow(true);
  } finally {
    context.cancellation.removeEventListener('abort', onAbort);
    if (!(exit as SftExit | null)?.unkillable) await removePidFile(layout.pidFile);
  }
  return { exited: exit as unknown as SftExit, step, finished: finished as SftOutcome['finished'] };
}

/** Throws unless trainer.sft ran its last step: cancelled, exited with an error, or stopped from outside. */
async function throwUnlessDone({ exited, step, finished }: SftOutcome, files: AttemptFiles, context: SftContext): Promise<void> {
  if (exited.code !== 0) {
    if (context.cancellation.aborted) throw new SftCancelledError(`trainer.sft was stopped by a cancellation at step ${step}`);
    const stderr = await readFile(files.stderr, 'utf8').then(
      (t) => t.slice(-3000),
      () => '',
    );
    const how = exited.code !== null ? `code ${exited.code}` : `signal ${exited.signal}`;
    throw new SftExitError(
      `trainer.sft exited with ${how} at step ${step} (log ${files.stderr}):\n${stderr}`,
      PERMANENT_ERRORS.some((p) => p.test(stderr)),
    );
  }
  if (finished !== 'done') {
    if (context.cancellation.aborted) throw new SftCancelledError(`trainer.sft was stopped by a cancellation at step ${step}`);
    // A SIGTERM from outside (a node shutting down): it checkpointed; the retry resumes from there.
    throw new SftExitError(`trainer.sft stopped at step ${step} before its last step (log ${files.stdout}); the retry resumes`, false);
  }
}

/** The finished fine-tune's result, once its checkpoint and tokens are there: its metrics written, then done.json. */
async function recordFinishedSft(
  input: SftRunInput,
  layout: ReturnType<typeof sftLayout>,
  configHash: string,
  attempt: number,
): Promise<SftRunResult> {
  const newest = sftCheckpoints(input.runDir).at(-1);
  if (!newest) throw new SftExitError(`trainer.sft exited 0 but left no complete checkpoint in ${layout.checkpoints}`, true);
  if (!existsSync(layout.tokens)) throw new SftExitError(`trainer.sft exited 0 but wrote no tokens_out ${layout.tokens}`, true);
  const rows = await sftStepRows(input.runDir);
  const metrics = await writeParquetArtifact({
    path: layout.metrics,
    schemaName: RFT_SFT_METRICS_SCHEMA_NAME,
    schemaVersion: RFT_SCHEMA_VERSION,
    arrowSchema: rftSftStepColumns.arrowSchema(),
    rows,
    inputs: [input.sampled],
    configHash,
  });
  const result = { checkpoint: newest.path, steps: newest.step, metrics, tokensPath: layout.tokens, attempts: attempt };
  await writeBytesAtomically(layout.done, JSON.stringify({ configHash, checkpoint: newest.path, result }, null, 2) + '\n');
  return { ...result, cached: false };
}

async function readDone(file: string): Promise<{ configHash: string; checkpoint: string; result: Omit<SftRunResult, 'cached'> } | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as { configHash: string; checkpoint: string; result: Omit<SftRunResult, 'cached'> };
  } catch {
    return null;
  }
}
