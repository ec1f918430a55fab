import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CheckpointChoiceError, resolveServedCheckpoint, servedModelName } from './served-checkpoint';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

/** A run directory as the trainer leaves it: checkpoints with adapter weights, and an attempt's trainer config. */
function runDir(steps: number[], trainer: Record<string, unknown> = { model_path: '/models/tiny', recipe: 'codescout', max_turns: 6 }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'served-checkpoint-'));
  dirs.push(dir);
  for (const step of steps) {
    const checkpoint = path.join(dir, 'training', 'trainer', 'checkpoints', `step-${String(step).padStart(8, '0')}`);
    mkdirSync(checkpoint, { recursive: true });
    writeFileSync(path.join(checkpoint, 'adapter_model.safetensors'), `weights of step ${step}`);
    writeFileSync(path.join(checkpoint, 'COMPLETE'), `step ${step}\n`);
  }
  // An incomplete one (no COMPLETE marker) is never served.
  mkdirSync(path.join(dir, 'training', 'trainer', 'checkpoints', 'step-00000099'), { recursive: true });
  const segment = path.join(dir, 'training', 'segments', 'segment-0001');
  mkdirSync(segment, { recursive: true });
  writeFileSync(path.join(segment, 'attempt-01.config.json'), JSON.stringify({ model_path: '/old' }));
  writeFileSync(path.join(segment, 'attempt-02.config.json'), JSON.stringify(trainer));
  return dir;
}

describe('resolveServedCheckpoint', () => {
  it('names the newest complete checkpoint by run and step, with its adapter sha256 and its training config', async () => {
    const dir = runDir([2, 4]);
    const served = await resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 'latest');
    expect(served.step).toBe(4);
    expect(served.servedName).toBe('r1/step-00000004');
    expect(served.adapterSha256).toBe(createHash('sha256').update('weights of step 4').digest('hex'));
    expect(served.trainerConfigPath.endsWith('attempt-02.config.json')).toBe(true);
    expect(served.baseModel).toBe('/models/tiny');
    expect(served.trainedWith).toEqual({ recipe: 'codescout', answerFormat: 'codescout', maxTurns: 6 });
  });

  it('names a full fine-tune checkpoint (no adapter) by its model weights, and refuses a directory with neither', async () => {
    const dir = runDir([2, 4]);
    const full = path.join(dir, 'training', 'trainer', 'checkpoints', 'step-00000004');
    rmSync(path.join(full, 'adapter_model.safetensors'));
    writeFileSync(path.join(full, 'model.safetensors'), 'the whole model at step 4');
    const served = await resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 4);
    expect(served.adapterSha256).toBe(createHash('sha256').update('the whole model at step 4').digest('hex'));
    rmSync(path.join(full, 'model.safetensors'));
    await expect(resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 4)).rejects.toThrow(
      /holds neither adapter_model.safetensors nor model.safetensors/,
    );
  });

  it('serves a named step, and the recipe preset fills in what the trainer config leaves out', async () => {
    const dir = runDir([2, 4], { model_path: '/m', recipe: 'codegrep-v3' });
    const served = await resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 2);
    expect(served.step).toBe(2);
    expect(served.trainedWith).toEqual({ recipe: 'codegrep-v3', answerFormat: 'codegrep', maxTurns: 4 });
  });

  it('refuses a step the run does not have, naming the ones it has', async () => {
    const dir = runDir([2, 4]);
    await expect(resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 99)).rejects.toThrow(
      /no complete checkpoint at step 99 \(it has 2, 4\)/,
    );
  });

  it('refuses best without validation metrics, and a run with no checkpoint', async () => {
    const dir = runDir([2]);
    await expect(resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 'best')).rejects.toThrow(/best needs validation metrics/);
    await expect(resolveServedCheckpoint({ runId: 'r1', runDir: dir }, 'best', 2)).resolves.toMatchObject({ step: 2 });
    const empty = mkdtempSync(path.join(os.tmpdir(), 'served-checkpoint-'));
    dirs.push(empty);
    await expect(resolveServedCheckpoint({ runId: 'r2', runDir: empty }, 'latest')).rejects.toBeInstanceOf(CheckpointChoiceError);
  });

  it('pads the step to eight digits, as the checkpoint folders are', () => {
    expect(servedModelName('demo', 897)).toBe('demo/step-00000897');
  });
});
