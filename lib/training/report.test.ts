import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { hashConfig, readParquetObjects, writeParquetArtifact } from '../artifacts';
import { TrainingReportInputSchema } from '../../schemas/training/activity-io';
import {
  TRAINING_METRICS_SCHEMA_NAME,
  TRAINING_METRICS_SCHEMA_VERSION,
  trainingMetricsArrowSchema,
  type TrainingMetricsRow,
} from '../../schemas/training/metrics';
import { effectiveRecipeRows, stalenessLine, summarizeTraining, trainingReportMarkdown } from './report';
import { stepRowFromLine } from './step-lines';

/** A step line of an async run as trainer/train.py prints it (trainer/README.md "Output"). */
const asyncStepLine = (step: number, versions: { policy_version?: number; staleness?: number }) =>
  JSON.stringify({
    event: 'step',
    step,
    epoch: 0,
    ...versions,
    reward_mean: 0.4,
    reward_std: 0.1,
    reward_components: {},
    turns_mean: 2,
    tool_calls_per_turn_mean: 1.5,
    advantage_scale_mean: 0.6,
    answered_ratio: 0.5,
    hit_turn_limit_ratio: 0,
    masked_ratio: 0,
    completion_len_mean: 12,
    truncated_ratio: 0,
    kl: null,
    loss: 0.2,
    clip_ratio: 0.01,
    grad_norm: 0.3,
    lr: 1e-6,
    step_time_s: 5,
    rollout_time_s: 1,
    update_time_s: 4,
    rollout_tokens: 24,
    train_tokens: 600,
    rollout_tokens_per_s: 24,
    train_tokens_per_s: 150,
    is_weight_mean: 0.98,
    checkpoint: null,
  });

describe('effectiveRecipeRows', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it("lists the trainer's effective recipe with each value's source, and nothing when it wrote none", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'recipe-'));
    dirs.push(dir);
    expect(effectiveRecipeRows(dir)).toEqual([]);
    writeFileSync(
      path.join(dir, 'recipe.json'),
      JSON.stringify({
        recipe: { value: 'codescout', source: 'config' },
        algorithm: { value: 'gspo', source: 'CodeScout §3.4: GSPO (Eq. 2-3)' },
        lr: { value: 2e-6, source: 'config' },
      }),
    );
    expect(effectiveRecipeRows(dir)).toEqual([
      ['recipe', '"codescout"', 'config'],
      ['algorithm', '"gspo"', 'CodeScout §3.4: GSPO (Eq. 2-3)'],
      ['lr', '0.000002', 'config'],
    ]);
  });
});

describe('policy version and staleness (CodeScout §3.4 async training)', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('survive from the step lines into the metrics Parquet (null for lines without them) and the training report', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'staleness-'));
    dirs.push(dir);
    // Lag 2: steps 1-3 learn from the initial weights (version 0), step 4 from version 1; the last line is an older trainer's.
    const lines = [
      asyncStepLine(1, { policy_version: 0, staleness: 0 }),
      asyncStepLine(2, { policy_version: 0, staleness: 1 }),
      asyncStepLine(3, { policy_version: 0, staleness: 2 }),
      asyncStepLine(4, { policy_version: 1, staleness: 2 }),
      asyncStepLine(5, {}),
    ];
    const rows = lines.map((text, i) => stepRowFromLine(text, { segment: 1, attempt: 1, line: i + 1, file: 'f' })!);
    const file = path.join(dir, 'segment-1.parquet');
    const ref = await writeParquetArtifact({
      path: file,
      schemaName: TRAINING_METRICS_SCHEMA_NAME,
      schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
      arrowSchema: trainingMetricsArrowSchema,
      rows,
      inputs: [],
      configHash: hashConfig({ test: 'staleness' }),
    });
    expect(ref.schemaVersion).toBe(2);
    const back = (await readParquetObjects(file)) as unknown as TrainingMetricsRow[];
    expect(back.map((r) => [r.step, r.policyVersion, r.staleness])).toEqual([
      [1, 0, 0],
      [2, 0, 1],
      [3, 0, 2],
      [4, 1, 2],
      [5, null, null],
    ]);

    const input = TrainingReportInputSchema.parse({
      runId: 'r',
      runDir: dir,
      step: 5,
      recipe: 'codescout',
      algorithm: 'gspo',
      budget: 5,
      stoppedEarly: false,
      smokeRun: false,
      modelDir: '/m',
    });
    const markdown = trainingReportMarkdown(input, summarizeTraining(input, back, [], [], []), [], 1);
    expect(markdown).toContain(
      '| rollout staleness (policy versions behind) | staleness max 2, mean 1.25 over 4 steps, 1 steps without it |',
    );
  });

  it('says staleness was not recorded for rows of a run older than the columns', () => {
    const v1Row = {} as Pick<TrainingMetricsRow, 'staleness'>; // a schema version 1 row has no staleness key at all
    expect(stalenessLine([v1Row, { staleness: null }])).toBe('– (not recorded by this trainer)');
    expect(stalenessLine([{ staleness: 0 }, { staleness: 0 }])).toBe('staleness max 0, mean 0 over 2 steps');
  });
});
