import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { segmentDir } from '../lib/training/layout';
import { ResolvedTrainingConfigSchema } from '../schemas/training/config';
import type { TrainSegmentInput } from '../schemas/training/activity-io';
import { activityDeps, createActivities } from './index';

/**
 * A training segment of a run with a store works in this node's own run dir (README "Deployment: several
 * machines"): the one under the data dir the worker read at start (`deps.nodeDataDir`), never one under a
 * CODEGREP_DATA_DIR the process has now. The segment stops at the node check (no python on this node), after it
 * opened its storage and made its folders: that is where it would have trained.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function tempDir(label: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `codegrep-train-deps-${label}-`));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function segmentInput(runDir: string, store: string, python: string): TrainSegmentInput {
  return {
    runId: 'run-1',
    runDir,
    samples: {
      uri: path.join(runDir, 'environment', 'samples.parquet'),
      sha256: '0'.repeat(64),
      rows: 1,
      schema: 'sample',
      schemaVersion: 1,
    },
    training: ResolvedTrainingConfigSchema.parse({ modelDir: '/no/model', steps: 2, gpuTaskQueue: 'q', python }),
    segment: 1,
    fromStep: 0,
    targetStep: 2,
    totalSteps: 2,
    store: { uri: `file://${store}`, repoSource: { kind: 'mirror-dir', dir: '/no/mirrors' } },
  };
}

describe('trainSegment built with injected deps', () => {
  it('with a store, the segment works under deps.nodeDataDir, not under CODEGREP_DATA_DIR or the run dir', async () => {
    const root = await tempDir('node');
    const runDir = path.join(root, 'shared', 'run-1');
    const store = path.join(root, 'store');
    const nodeDir = path.join(root, 'node-of-deps');
    const processDir = path.join(root, 'node-of-process');
    const before = process.env.CODEGREP_DATA_DIR;
    process.env.CODEGREP_DATA_DIR = processDir;
    cleanup.push(async () => {
      if (before === undefined) delete process.env.CODEGREP_DATA_DIR;
      else process.env.CODEGREP_DATA_DIR = before;
    });
    const { trainSegment } = createActivities(activityDeps({ nodeDataDir: nodeDir }));

    const python = path.join(root, 'no-python');
    const failed = new MockActivityEnvironment({ attempt: 1 }).run(trainSegment, segmentInput(runDir, store, python));
    await expect(failed).rejects.toThrow(`training.python: ${python} does not exist`);

    expect(existsSync(segmentDir(path.join(nodeDir, 'run-1'), 1))).toBe(true);
    expect(existsSync(processDir)).toBe(false);
    expect(existsSync(runDir)).toBe(false);
  });
});
