import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { readArtifactRows, readParquetObjects, readRows } from '../lib/artifacts';
import { buildSamples, indexRetainedLabels } from '../lib/labels/samples';
import { CatmLabelSchema } from '../schemas/samples';
import { sharedData } from '../test/support/repo-root';
import { activityDeps, createActivities } from './index';

/** Every URI the activities open through lib/artifacts' row readers (the real readers, counted). */
const opened = vi.hoisted(() => [] as string[]);
vi.mock('../lib/artifacts', async (importOriginal) => {
  const real = await importOriginal<typeof import('../lib/artifacts')>();
  return {
    ...real,
    readRows: (uri: string) => {
      opened.push(uri);
      return real.readRows(uri);
    },
    readArtifactRows: <T>(uri: string, parse: (row: unknown) => T, what?: string) => {
      opened.push(uri);
      return real.readArtifactRows(uri, parse, what);
    },
  };
});

/**
 * CATM's weight step (CodeGrep §3.4) on real OpenHands trajectories and SWE-bench Verified instances: the samples
 * merge the labels it has just weighed, held in memory as they are written, without reading labels.parquet back,
 * and they are the samples the labels file on disk gives.
 */
let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'codegrep-weight-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const run = <T>(activity: () => Promise<T>): Promise<T> => new MockActivityEnvironment({ attempt: 1 }).run(activity) as Promise<T>;

describe('weight', () => {
  it('builds the samples from the labels it writes, never reading labels.parquet back, with the same content', async () => {
    const runDir = path.join(root, 'run-w');
    const trajectoriesPath = path.join(root, 'trajectories.jsonl');
    const lines = readFileSync(path.join(sharedData, 'openhands_trajectories.sample.jsonl'), 'utf8').split('\n');
    await writeFile(trajectoriesPath, lines.slice(0, 12).join('\n') + '\n');
    const instancesPath = path.join(sharedData, 'swebench_verified.jsonl');
    const activities = createActivities(activityDeps());

    const mined = await run(() => activities.mine({ runId: 'run-w', runDir, trajectoriesPath }));
    const judged = await run(() =>
      activities.judge({ runId: 'run-w', runDir, candidates: mined.candidates, instancesPath, judge: { mode: 'none' } }),
    );
    opened.length = 0;
    const weighed = await run(() =>
      activities.weight({ runId: 'run-w', runDir, candidates: mined.candidates, judgements: judged.judgements, instancesPath }),
    );

    expect(weighed.summary.retained).toBeGreaterThan(0);
    expect(weighed.summary.samplesWithCatm).toBeGreaterThan(0);
    expect(opened).not.toContain(weighed.labels.uri);
    expect(opened.filter((uri) => uri === instancesPath)).toHaveLength(1);

    // The samples the labels on disk give (what the step built when it read them back) are the ones it wrote.
    const index = await indexRetainedLabels(readArtifactRows(weighed.labels.uri, (row) => CatmLabelSchema.parse(row)));
    const fromDisk = buildSamples(readRows(instancesPath), index, { source: `instances ${instancesPath}` });
    const expected = [];
    for await (const sample of fromDisk.samples) expected.push(sample);
    const written = await readParquetObjects(weighed.samples.uri);
    expect(written.length).toBe(expected.length);
    expect(JSON.parse(JSON.stringify(written))).toEqual(JSON.parse(JSON.stringify(expected)));
  }, 120_000);
});
