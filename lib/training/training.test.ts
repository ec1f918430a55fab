import * as arrow from 'apache-arrow';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { hashConfig, writeParquetArtifact } from '../artifacts';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { TRAINING_METRICS_SCHEMA_NAME, TRAINING_METRICS_SCHEMA_VERSION, trainingMetricsArrowSchema } from '../../schemas/training/metrics';
import { trainerArgs, trainerConfig } from './trainer-config';
import {
  attemptFiles,
  listSegments,
  missingSteps,
  newestCheckpoint,
  newestPerStep,
  readSegmentLogRows,
  rolloutEngines,
  segmentTrainerStarts,
  runMetricsRows,
  segmentDir,
  segmentMetricsPath,
  stepRowFromLine,
  trainingLayout,
} from '.';
import { LineTail } from '../process';
import { reapStaleTrainer, writePidFile } from './trainer-pid-file';
import { runTrainer } from './run-trainer';
import { initialSegmentState } from './trainer-events';

let runDir: string;
beforeEach(() => {
  runDir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-training-metrics-'));
});
afterEach(() => rmSync(runDir, { recursive: true, force: true }));

/** A step line exactly as trainer/train.py prints it (trainer/README.md "Output"). */
function stepLine(step: number, reward: number): string {
  return JSON.stringify({
    event: 'step',
    step,
    epoch: 0,
    reward_mean: reward,
    reward_std: 0.1,
    reward_components: { file_fbeta: reward, tool_mask: 1 },
    turns_mean: 2,
    tool_calls_per_turn_mean: 1.5,
    advantage_scale_mean: 0.6,
    answered_ratio: 0.5,
    hit_turn_limit_ratio: 0,
    masked_ratio: 0,
    completion_len_mean: 12,
    truncated_ratio: 0,
    kl: 0.01,
    loss: 0.2,
    clip_ratio: 0,
    grad_norm: 0.3,
    lr: 1e-3,
    step_time_s: 5,
    rollout_time_s: 1,
    update_time_s: 4,
    rollout_tokens: 24,
    train_tokens: 6000,
    rollout_tokens_per_s: 24,
    train_tokens_per_s: 1500,
    checkpoint: null,
  });
}

function writeAttempt(segment: number, attempt: number, lines: string[]): void {
  const dir = segmentDir(runDir, segment);
  mkdirSync(dir, { recursive: true });
  writeFileSync(attemptFiles(dir, attempt).stdout, lines.join('\n') + '\n');
}

const rewards = (rows: { step: number; rewardMean: number }[]) => rows.map((r) => [r.step, r.rewardMean]);

describe('step lines to metrics rows', () => {
  it('reads every attempt of a segment in order and keeps the newest record of each step', () => {
    // Attempt 1 recorded steps 1-3 and died before checkpointing step 3; attempt 2 resumed at 2 and redid 3.
    writeAttempt(1, 1, [
      '{"event": "start", "step": 0, "total_steps": 4}',
      stepLine(1, 0.1),
      'Some library printed this to stdout',
      stepLine(2, 0.2),
      stepLine(3, 0.3),
    ]);
    writeAttempt(1, 2, [
      '{"event": "resumed", "step": 2, "checkpoint": "x"}',
      stepLine(3, 0.33),
      stepLine(4, 0.4),
      '{"event": "done", "step": 4}',
    ]);
    const rows = readSegmentLogRows(runDir, 1);
    expect(rows.map((r) => [r.attempt, r.step, r.line])).toEqual([
      [1, 1, 2],
      [1, 2, 4],
      [1, 3, 5],
      [2, 3, 2],
      [2, 4, 3],
    ]);
    expect(rewards(newestPerStep(rows))).toEqual([
      [1, 0.1],
      [2, 0.2],
      [3, 0.33],
      [4, 0.4],
    ]);
    expect(rows[0]!.rewardComponents).toEqual([
      { name: 'file_fbeta', value: 0.1 },
      { name: 'tool_mask', value: 1 },
    ]);
    expect(rows[0]!.peakGpuMemGb).toBeNull();
  });

  it('a later segment wins over an earlier one, whatever order the rows come in', () => {
    writeAttempt(1, 1, [stepLine(5, 0.5)]);
    writeAttempt(2, 1, [stepLine(5, 0.55)]);
    const rows = [...readSegmentLogRows(runDir, 2), ...readSegmentLogRows(runDir, 1)];
    expect(rewards(newestPerStep(rows))).toEqual([[5, 0.55]]);
  });

  it('refuses a step line that breaks the trainer contract, naming the file, line and field', () => {
    const bad = JSON.stringify({ ...JSON.parse(stepLine(1, 0.1)), kl: 'n/a' });
    expect(() => stepRowFromLine(bad, { segment: 1, attempt: 1, line: 7, file: '/x/attempt-01.stdout.jsonl' })).toThrow(
      /\/x\/attempt-01\.stdout\.jsonl:7: the trainer's step line does not match trainer\/README\.md "Output": kl: /,
    );
    expect(stepRowFromLine('{"event": "checkpoint", "step": 1, "path": "p"}', { segment: 1, attempt: 1, line: 1, file: 'f' })).toBeNull();
    expect(stepRowFromLine('not json', { segment: 1, attempt: 1, line: 1, file: 'f' })).toBeNull();
  });

  it('reads a metrics file of schema version 1 (no policy version or staleness columns) with those as null', async () => {
    writeAttempt(1, 1, [stepLine(1, 0.1)]);
    const v1Schema = new arrow.Schema(
      trainingMetricsArrowSchema.fields.filter((f) => f.name !== 'policyVersion' && f.name !== 'staleness'),
    );
    await writeParquetArtifact({
      path: segmentMetricsPath(runDir, 1),
      schemaName: TRAINING_METRICS_SCHEMA_NAME,
      schemaVersion: 1,
      arrowSchema: v1Schema,
      rows: readSegmentLogRows(runDir, 1).map(({ policyVersion: _p, staleness: _s, ...v1 }) => v1),
      inputs: [],
      configHash: hashConfig({ test: 'v1' }),
    });
    const rows = await runMetricsRows(runDir, 1);
    expect(rows.map((r) => [r.step, r.policyVersion, r.staleness])).toEqual([[1, null, null]]);
  });

  it('merges the run: Parquet where a segment wrote one, logs where it could not, nothing above the last step', async () => {
    writeAttempt(1, 1, [stepLine(1, 0.1), stepLine(2, 0.2)]);
    await writeParquetArtifact({
      path: segmentMetricsPath(runDir, 1),
      schemaName: TRAINING_METRICS_SCHEMA_NAME,
      schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
      arrowSchema: trainingMetricsArrowSchema,
      rows: newestPerStep(readSegmentLogRows(runDir, 1)).map((r) => ({ ...r, rewardMean: r.rewardMean * 10 })),
      inputs: [],
      configHash: hashConfig({ test: 1 }),
    });
    // Segment 2 never finished (its workflow ended): its log is all there is; step 5 is off the lineage.
    writeAttempt(2, 1, [stepLine(3, 0.3), stepLine(4, 0.4), stepLine(5, 0.5)]);
    expect(listSegments(runDir)).toEqual([1, 2]);
    const rows = await runMetricsRows(runDir, 4);
    expect(rewards(rows)).toEqual([
      [1, 1],
      [2, 2],
      [3, 0.3],
      [4, 0.4],
    ]);
    expect(missingSteps(rows, 4)).toEqual([]);
    expect(
      missingSteps(
        rows.filter((r) => r.step !== 2),
        5,
      ),
    ).toEqual([2, 5]);
  });

  it('finds the newest complete checkpoint only', () => {
    const checkpoints = trainingLayout(runDir).checkpoints;
    for (const [name, complete] of [
      ['step-00000002', true],
      ['step-00000004', true],
      ['step-00000006', false],
      ['.tmp-step-00000008-1-2', true],
    ] as const) {
      mkdirSync(path.join(checkpoints, name), { recursive: true });
      if (complete) writeFileSync(path.join(checkpoints, name, 'COMPLETE'), 'step\n');
    }
    expect(newestCheckpoint(runDir)).toEqual({ step: 4, path: path.join(checkpoints, 'step-00000004') });
  });
});

describe('trainerConfig', () => {
  const base = {
    modelDir: '/models/qwen3',
    recipe: 'codescout',
    algorithm: 'drgrpo',
    steps: 100,
    segmentSteps: 10,
    limits: {},
    seed: 3,
    codescoutTurnBonus: false,
    trainer: { generator: 'hf', dtype: 'float32' },
    python: '/p',
    gpuTaskQueue: 'q',
    stopGraceMs: 1000,
    progressEveryMs: 1000,
    smokeRun: false,
  } as unknown as ResolvedTrainingConfig;

  it("writes what the section sets, the recipe's name, and nothing it leaves to the recipe or the trainer", () => {
    const config = trainerConfig(base, {
      outputDir: '/run/training/trainer',
      envUrl: 'http://127.0.0.1:1',
      instanceIds: ['a', 'b'],
      totalSteps: 100,
    });
    expect(config).toEqual({
      generator: 'hf',
      dtype: 'float32',
      model_path: '/models/qwen3',
      output_dir: '/run/training/trainer',
      env_url: 'http://127.0.0.1:1',
      data: { instance_ids: ['a', 'b'] },
      total_steps: 100,
      seed: 3,
      recipe: 'codescout',
      algorithm: 'dr_grpo',
      max_turns: 4,
    });
    // Left to the recipe (finding 4: codescout must not get GRPO's defaults from here).
    const { algorithm: _algorithm, ...recipeOnly } = base as unknown as Record<string, unknown>;
    const fromRecipe = trainerConfig(recipeOnly as unknown as ResolvedTrainingConfig, {
      outputDir: 'o',
      envUrl: 'u',
      instanceIds: ['a'],
      totalSteps: 1,
    });
    for (const key of ['algorithm', 'lr', 'kl_beta', 'mask_unanswered_at_turn_limit', 'clip_low', 'warmup_ratio'])
      expect(fromRecipe).not.toHaveProperty(key);
    expect(fromRecipe).toMatchObject({ recipe: 'codescout', max_turns: 4 });
  });

  it('passes the chosen limits and hyperparameters under the trainer names', () => {
    const config = trainerConfig(
      {
        ...base,
        recipe: 'v2',
        algorithm: 'gspo',
        groupSize: 4,
        batchSize: 2,
        lr: 1e-5,
        klBeta: 0,
        limits: { maxTurns: 3, maxNewTokens: 256 },
        lora: { r: 8 },
      },
      { outputDir: 'o', envUrl: 'u', instanceIds: ['a'], totalSteps: 7 },
    );
    expect(config).toMatchObject({
      recipe: 'codegrep-v2',
      algorithm: 'gspo',
      group_size: 4,
      batch_size: 2,
      lr: 1e-5,
      kl_beta: 0,
      max_turns: 3,
      max_new_tokens: 256,
      lora: { r: 8 },
      total_steps: 7,
    });
  });
});

describe('rolloutEngines', () => {
  it("names each engine the trainers' start lines reported, once", () => {
    const start = (fields: Record<string, unknown>) =>
      JSON.stringify({
        event: 'start',
        step: 0,
        total_steps: 4,
        device: 'cpu',
        generator: 'hf',
        parameters: 1,
        trainable_parameters: 1,
        instances: 2,
        ...fields,
      }) + '\n';
    for (const [segment, attempt, line] of [
      [1, 1, start({ generator_reason: 'auto: no CUDA device (cpu), so vLLM cannot run', world_size: 2 })],
      [1, 2, start({ generator_reason: 'auto: no CUDA device (cpu), so vLLM cannot run', world_size: 2 })],
      [2, 1, start({ device: 'cuda', generator: 'vllm', generator_reason: 'auto: CUDA device and vLLM 0.33.0' })],
    ] as const) {
      mkdirSync(segmentDir(runDir, segment), { recursive: true });
      writeFileSync(attemptFiles(segmentDir(runDir, segment), attempt).stdout, 'not json\n' + line);
    }
    expect(rolloutEngines(runDir)).toEqual([
      'hf — auto: no CUDA device (cpu), so vLLM cannot run — 2 processes on cpu',
      'vllm — auto: CUDA device and vLLM 0.33.0 — 1 process on cuda',
    ]);
  });
});

describe('segmentTrainerStarts', () => {
  it("returns each attempt's start line, oldest first, so a retry that finds the segment done can report the model size", () => {
    const start = (fields: Record<string, unknown>) =>
      JSON.stringify({
        event: 'start',
        step: 0,
        total_steps: 4,
        device: 'cpu',
        generator: 'hf',
        trainable_parameters: 1,
        instances: 2,
        ...fields,
      }) + '\n';
    mkdirSync(segmentDir(runDir, 3), { recursive: true });
    writeFileSync(attemptFiles(segmentDir(runDir, 3), 1).stdout, start({ parameters: 103168 }));
    writeFileSync(attemptFiles(segmentDir(runDir, 3), 2).stdout, 'not json\n' + start({ parameters: 103168, device: 'cuda' }));
    const starts = segmentTrainerStarts(runDir, 3);
    expect(starts.map((s) => [s.parameters, s.device])).toEqual([
      [103168, 'cpu'],
      [103168, 'cuda'],
    ]);
    expect(segmentTrainerStarts(runDir, 4)).toEqual([]);
  });
});

describe('trainerArgs', () => {
  it('runs one trainer process for one GPU and torchrun with a process per GPU for more', () => {
    expect(trainerArgs({ gpus: 1 }, '/c.json')).toEqual(['-m', 'trainer.train', '--config', '/c.json', '--resume', 'latest']);
    expect(trainerArgs({ gpus: 8 }, '/c.json')).toEqual([
      '-m',
      'torch.distributed.run',
      '--standalone',
      '--nproc-per-node',
      '8',
      '-m',
      'trainer.train',
      '--config',
      '/c.json',
      '--resume',
      'latest',
    ]);
  });
});

describe('trainer process helpers', () => {
  it('LineTail returns complete lines once, and the unterminated last one only at the end', async () => {
    const file = path.join(runDir, 'out.jsonl');
    const tail = new LineTail(file);
    expect(await tail.read()).toEqual([]);
    writeFileSync(file, '{"a": 1}\n{"b": ');
    expect(await tail.read()).toEqual([{ line: 1, text: '{"a": 1}' }]);
    appendFileSync(file, '2}\n\n{"c"');
    expect(await tail.read()).toEqual([{ line: 2, text: '{"b": 2}' }]);
    expect(await tail.read(true)).toEqual([{ line: 4, text: '{"c"' }]);
  });

  it('reaps a trainer left by an earlier attempt: SIGTERM first, SIGKILL when it ignores it', async () => {
    const pidFile = path.join(runDir, 'trainer.pid.json');
    const polite = spawn('sleep', ['60'], { detached: true, stdio: 'ignore' });
    const politeExit = new Promise((r) => polite.once('exit', (_code, signal) => r(signal)));
    await writePidFile(pidFile, polite.pid!, { segment: 1, attempt: 1 });
    expect((await reapStaleTrainer(pidFile, 10_000)).action).toBe('terminated');
    expect(await politeExit).toBe('SIGTERM');

    const stubborn = spawn(
      'python3',
      ['-c', 'import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint("ready", flush=True)\ntime.sleep(60)'],
      {
        detached: true,
        stdio: ['ignore', 'pipe', 'ignore'],
      },
    );
    await new Promise((r) => stubborn.stdout!.once('data', r));
    const stubbornExit = new Promise((r) => stubborn.once('exit', (_code, signal) => r(signal)));
    await writePidFile(pidFile, stubborn.pid!, { segment: 1, attempt: 2 });
    expect((await reapStaleTrainer(pidFile, 500)).action).toBe('killed');
    expect(await stubbornExit).toBe('SIGKILL');

    expect((await reapStaleTrainer(pidFile, 500)).action).toBe('none');
    writeFileSync(
      pidFile,
      JSON.stringify({ pid: polite.pid, startTicks: '1', host: os.hostname(), segment: 1, attempt: 1, startedAt: '' }),
    );
    expect((await reapStaleTrainer(pidFile, 500)).action).toBe('gone');
    writeFileSync(
      pidFile,
      JSON.stringify({ pid: process.pid, startTicks: null, host: 'another-node', segment: 1, attempt: 1, startedAt: '' }),
    );
    expect((await reapStaleTrainer(pidFile, 500)).action).toBe('other-host');
  });

  it("a trainer that ignores the cancellation's SIGTERM is SIGKILLed with its group after the grace, onForceKill once, and its pid record goes", async () => {
    const files = { stdout: path.join(runDir, 'attempt.stdout.jsonl'), stderr: path.join(runDir, 'attempt.stderr.log') };
    const pidFile = path.join(runDir, 'trainer.pid.json');
    const cancellation = new AbortController();
    const forceKills: number[] = [];
    let started = 0;
    const running = runTrainer({
      python: 'sh',
      args: ['-c', 'trap "" TERM; sleep 30 & wait'],
      cwd: runDir,
      env: { PATH: process.env.PATH },
      files,
      pidFile,
      segment: 1,
      attempt: 1,
      targetStep: 2,
      totalSteps: 2,
      initial: initialSegmentState(null),
      cancellation: cancellation.signal,
      graceMs: 300,
      onStarted: (pid) => (started = pid),
      onEvent: () => undefined,
      onForceKill: () => forceKills.push(Date.now()),
    });
    for (let i = 0; i < 100 && started === 0; i++) await new Promise((r) => setTimeout(r, 20));
    setImmediate(() => cancellation.abort()); // as the SDK delivers a cancellation: from its own callback
    const run = await running;
    expect(run.exit).toEqual({ code: null, signal: 'SIGKILL' });
    expect(run.unkillable).toBeNull();
    expect(run.stopReason).toBe('cancelled');
    expect(forceKills).toHaveLength(1);
    expect(() => process.kill(started, 0)).toThrow();
    expect(existsSync(pidFile)).toBe(false);
  });
});
