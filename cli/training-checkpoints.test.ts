import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeValidationRecords } from '../lib/training/validation';
import { checkpointLines } from './training-checkpoints';

const dir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-checkpoints-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('codegrep training checkpoints', () => {
  it('lists the steps with their validation figures and marks the best', async () => {
    for (const step of [2, 4]) {
      const checkpoint = path.join(dir, 'training', 'trainer', 'checkpoints', `step-${String(step).padStart(8, '0')}`);
      mkdirSync(checkpoint, { recursive: true });
      writeFileSync(path.join(checkpoint, 'adapter_model.safetensors'), `w${step}`);
      writeFileSync(path.join(checkpoint, 'COMPLETE'), '');
    }
    const row = (step: number, value: number) => ({
      step,
      metric: 'fBetaMean',
      value,
      instances: 3,
      failed: 0,
      adapterSha256: 'a'.repeat(64),
      servedModel: `r/step-${String(step).padStart(8, '0')}`,
      evaluationDir: '/x',
    });
    await writeValidationRecords(dir, [row(2, 0.25), row(4, 0.125)]);
    const lines = await checkpointLines('r', dir);
    expect(lines[0]).toMatch(/^r: 2 complete checkpoint\(s\) in /);
    expect(lines[2]).toMatch(/^ {2}2 \(best\) +[0-9a-f]{16} +fBetaMean 0\.2500 +3 +r\/step-00000002$/);
    expect(lines[3]).toMatch(/^ {2}4 +[0-9a-f]{16} +fBetaMean 0\.1250 +3 +r\/step-00000004$/);
  });
});
