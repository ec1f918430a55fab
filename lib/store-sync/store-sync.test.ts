import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as arrow from 'apache-arrow';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { PipelineConfigSchema } from '../../schemas/config';
import { StoreUriSchema } from '../../schemas/store';
import { hashConfig, readParquetObjects, readRows, writeParquetArtifact } from '../artifacts';
import {
  fileStoreUri,
  openArtifactStore,
  storeSettingsFromEnv,
  pullDirectory,
  pushDirectory,
  readDirectoryMarker,
  StoreIntegrityError,
} from '../artifacts/store';
import { bareMirror, createSyntheticRepo } from '../worktrees/synthetic-repo';
import {
  SegmentMirror,
  inspectStoredRun,
  loggedSteps,
  materializeSampleWorktrees,
  nodeDataDir,
  publishRunArtifact,
  pullTrainingRecords,
  readLogParts,
  runDirOnNode,
  storedCheckpointSteps,
} from './index';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-store-sync-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
let n = 0;
const fresh = (name: string) => {
  const dir = path.join(work, `${++n}-${name}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};

const stepLine = (step: number) => JSON.stringify({ event: 'step', step, reward_mean: 0.5 });

/** A trainer output on a node: checkpoints step-N (complete unless `partial`) and segment 1's attempt logs. */
function trainerState(runDir: string, opts: { checkpoints: number[]; partial?: number[]; attempt?: number; lines: string[] }) {
  const cps = path.join(runDir, 'training', 'trainer', 'checkpoints');
  for (const step of [...opts.checkpoints, ...(opts.partial ?? [])]) {
    const dir = path.join(cps, `step-${String(step).padStart(8, '0')}`);
    mkdirSync(path.join(dir, 'sub'), { recursive: true });
    writeFileSync(path.join(dir, 'adapter_model.safetensors'), `weights of step ${step}`);
    writeFileSync(path.join(dir, 'sub', 'rng.pt'), `rng ${step}`);
    if (opts.checkpoints.includes(step)) writeFileSync(path.join(dir, 'COMPLETE'), '');
  }
  writeFileSync(path.join(runDir, 'training', 'trainer', 'recipe.json'), '{"lr":{"value":0.001,"source":"config"}}\n');
  const seg = path.join(runDir, 'training', 'segments', 'segment-0001');
  mkdirSync(seg, { recursive: true });
  const attempt = String(opts.attempt ?? 1).padStart(2, '0');
  writeFileSync(path.join(seg, `attempt-${attempt}.stdout.jsonl`), opts.lines.map((l) => `${l}\n`).join(''));
  writeFileSync(path.join(seg, `attempt-${attempt}.stderr.log`), 'loading model\n');
}

describe('store URIs in the config', () => {
  it('accepts s3:// and absolute file:// URIs, refuses the rest by field', () => {
    expect(StoreUriSchema.safeParse('s3://my-bucket/codegrep').success).toBe(true);
    expect(StoreUriSchema.safeParse('s3://my-bucket').success).toBe(true);
    expect(StoreUriSchema.safeParse('file:///data/store').success).toBe(true);
    for (const bad of ['s3://Bad_Bucket/x', 'gs://bucket/x', 'runs/store', 's3://bucket/a/../b', 'file://relative'])
      expect(StoreUriSchema.safeParse(bad).success, bad).toBe(false);
    const base = { runId: 'r', inputs: { trajectories: 't', instances: 'i' } };
    expect(PipelineConfigSchema.parse(base).store).toBeUndefined();
    expect(PipelineConfigSchema.parse({ ...base, store: 's3://b-1/p' }).store).toBe('s3://b-1/p');
    const refused = PipelineConfigSchema.safeParse({ ...base, store: 'ftp://x' });
    expect(refused.success).toBe(false);
    expect(refused.error!.issues[0]!.path).toEqual(['store']);
  });

  it('a node data dir replaces the run dir only where one is set', () => {
    expect(nodeDataDir({})).toBeNull();
    expect(nodeDataDir({ CODEGREP_DATA_DIR: '/local/gpu' })).toBe('/local/gpu');
    expect(runDirOnNode('/shared/runs/r1', 'r1', '/local/worker')).toBe('/local/worker/r1');
    expect(runDirOnNode('/shared/runs/r1', 'r1', null)).toBe('/shared/runs/r1');
  });
});

describe('directories with a completion marker (lib/artifacts/store/directories.ts)', () => {
  it('round-trips a tree; files without a marker are invisible; a pull verifies each file and replaces the target whole', async () => {
    const store = openArtifactStore(fileStoreUri(fresh('store')));
    const src = fresh('src');
    mkdirSync(path.join(src, 'a', 'b'), { recursive: true });
    writeFileSync(path.join(src, 'top.txt'), 'top');
    writeFileSync(path.join(src, 'a', 'b', 'deep.bin'), Buffer.from([0, 1, 2, 255]));
    expect(await readDirectoryMarker(store, 'markers/t.json')).toBeNull();
    const marker = await pushDirectory(store, src, 'trees/t', 'markers/t.json', { step: 3 });
    expect(marker.files.map((f) => f.path)).toEqual(['a/b/deep.bin', 'top.txt']);
    expect((await readDirectoryMarker(store, 'markers/t.json'))!.extra).toEqual({ step: 3 });

    const dest = path.join(fresh('dest'), 'tree');
    mkdirSync(dest, { recursive: true });
    writeFileSync(path.join(dest, 'stale.txt'), 'old');
    await pullDirectory(store, 'markers/t.json', dest);
    expect(readFileSync(path.join(dest, 'top.txt'), 'utf8')).toBe('top');
    expect([...readFileSync(path.join(dest, 'a', 'b', 'deep.bin'))]).toEqual([0, 1, 2, 255]);
    expect(existsSync(path.join(dest, 'stale.txt'))).toBe(false);
    expect(readdirSync(path.dirname(dest))).toEqual(['tree']);

    // A file changed behind the marker's back: the pull refuses it and leaves the target as it was.
    await store.putBytes('trees/t/top.txt', 'tampered');
    await expect(pullDirectory(store, 'markers/t.json', dest)).rejects.toThrow(StoreIntegrityError);
    expect(readFileSync(path.join(dest, 'top.txt'), 'utf8')).toBe('top');
    expect(readdirSync(path.dirname(dest))).toEqual(['tree']);
  });
});

describe('a training segment mirrored through a file:// store', () => {
  it('pushes logs, then the checkpoint the logs cover, then its marker; a fresh node pulls the newest complete one and the earlier attempt logs', async () => {
    const storeDir = fresh('store');
    const store = openArtifactStore(fileStoreUri(storeDir));
    const nodeB = path.join(fresh('node-b'), 'run-1');
    // Checkpoint 3 is complete on disk but its step line is not written yet; 4 is half-written.
    trainerState(nodeB, {
      checkpoints: [1, 2, 3],
      partial: [4],
      lines: ['not json', JSON.stringify({ event: 'start', step: 0 }), stepLine(1), stepLine(2), '{"event":"checkpoint","step":3}'],
    });
    const mirrorB = new SegmentMirror({ store, runId: 'run-1', localRunDir: nodeB, segment: 1, attempt: 1, startedAt: 1000 });
    expect((await mirrorB.pull()).checkpointStep).toBeNull();
    mirrorB.notify();
    mirrorB.notify(); // coalesced
    await mirrorB.flush();
    expect(await storedCheckpointSteps(store, 'run-1')).toEqual([2]);
    const storedLog = await readLogParts(store, 'run-1/training/segments/segment-0001/logs/attempt-01.stdout.jsonl/');
    expect(storedLog!.bytes.toString('utf8')).toContain(stepLine(2));
    expect(existsSync(path.join(storeDir, 'run-1/training/trainer/recipe.json'))).toBe(true);
    expect(mirrorB.checkpointUri(2)).toBe(`${fileStoreUri(path.join(storeDir, 'run-1/training/trainer/checkpoints/step-00000002'))}/`);

    // The step line of checkpoint 3 arrives: its marker goes up after the log that records it.
    writeFileSync(path.join(nodeB, 'training/segments/segment-0001/attempt-01.stdout.jsonl'), `${stepLine(3)}\n`, { flag: 'a' });
    await mirrorB.flush();
    expect(await storedCheckpointSteps(store, 'run-1')).toEqual([2, 3]);
    expect(await inspectStoredRun(store, 'run-1')).toEqual({ checkpointStep: 3, checkpoint: mirrorB.checkpointUri(3), lastSegment: 1 });

    // Node C starts with nothing: it gets checkpoint 3 (whole, with the trainer's COMPLETE) and attempt 1's logs.
    const nodeC = path.join(fresh('node-c'), 'run-1');
    const mirrorC = new SegmentMirror({ store, runId: 'run-1', localRunDir: nodeC, segment: 1, attempt: 2, startedAt: 2000 });
    const pulled = await mirrorC.pull();
    expect(pulled).toEqual({ checkpointStep: 3, logs: ['attempt-01.stderr.log', 'attempt-01.stdout.jsonl'] });
    const cp = path.join(nodeC, 'training/trainer/checkpoints');
    expect(readdirSync(cp)).toEqual(['step-00000003']);
    expect(readdirSync(path.join(cp, 'step-00000003')).sort()).toEqual(['COMPLETE', 'adapter_model.safetensors', 'sub']);
    expect(readFileSync(path.join(cp, 'step-00000003', 'sub', 'rng.pt'), 'utf8')).toBe('rng 3');
    expect(loggedSteps(readFileSync(path.join(nodeC, 'training/segments/segment-0001/attempt-01.stdout.jsonl'), 'utf8'))).toBe(3);
    expect(existsSync(path.join(nodeC, 'training/trainer/recipe.json'))).toBe(true);
    // A second pull finds nothing newer.
    expect(await mirrorC.pull()).toEqual({ checkpointStep: null, logs: [] });

    // C's own attempt 2 resumes at 3 and checkpoints 4; B's log stays as it was.
    trainerState(nodeC, { checkpoints: [4], attempt: 2, lines: [JSON.stringify({ event: 'resumed', step: 3 }), stepLine(4)] });
    await mirrorC.flush();
    expect(await storedCheckpointSteps(store, 'run-1')).toEqual([2, 3, 4]);
    expect(readdirSync(path.join(storeDir, 'run-1/training/segments/segment-0001/logs')).sort()).toEqual([
      'attempt-01.stderr.log',
      'attempt-01.stdout.jsonl',
      'attempt-02.stderr.log',
      'attempt-02.stdout.jsonl',
    ]);
    // Attempt 1's stdout: two parts (B's two pushes), not re-sent by C.
    expect(readdirSync(path.join(storeDir, 'run-1/training/segments/segment-0001/logs/attempt-01.stdout.jsonl'))).toHaveLength(2);

    // The segment's metrics Parquet: published with its manifest, the ref names the store's copy.
    const metrics = path.join(nodeC, 'training/metrics/segment-0001.parquet');
    const local = await writeParquetArtifact({
      path: metrics,
      schemaName: 'test-metrics',
      schemaVersion: 1,
      arrowSchema: new arrow.Schema([new arrow.Field('step', new arrow.Int32(), false)]),
      rows: [1, 2, 3, 4].map((step) => ({ step })),
      inputs: [],
      configHash: hashConfig({ t: 1 }),
    });
    const ref = await mirrorC.publishSegmentMetrics(metrics);
    expect(ref).toEqual({ ...local, uri: fileStoreUri(path.join(storeDir, 'run-1/training/metrics/segment-0001.parquet')) });
    expect((await readParquetObjects(ref.uri)).map((r) => r.step)).toEqual([1, 2, 3, 4]);

    // A CPU node's report reads logs, metrics and recipe, never a checkpoint.
    const nodeA = path.join(fresh('node-a'), 'run-1');
    expect(await pullTrainingRecords(store, 'run-1', nodeA)).toBeGreaterThan(0);
    expect(existsSync(path.join(nodeA, 'training/trainer/checkpoints'))).toBe(false);
    expect(existsSync(path.join(nodeA, 'training/metrics/segment-0001.parquet.manifest.json'))).toBe(true);
    expect(readdirSync(path.join(nodeA, 'training/segments/segment-0001'))).toHaveLength(4);
  });

  it('a failed push is retried by the next round; flush reports it', async () => {
    const store = openArtifactStore(fileStoreUri(fresh('store')));
    const node = path.join(fresh('node'), 'run-2');
    trainerState(node, { checkpoints: [1], lines: [stepLine(1)] });
    const errors: unknown[] = [];
    let failNext = true;
    const flaky = {
      ...store,
      putBytes: async (key: string, content: Uint8Array | string) => {
        if (failNext) {
          failNext = false;
          throw new Error('store down');
        }
        return store.putBytes(key, content);
      },
    };
    const mirror = new SegmentMirror({
      store: flaky,
      runId: 'run-2',
      localRunDir: node,
      segment: 1,
      attempt: 1,
      startedAt: 1000,
      onPushError: (e) => errors.push(e),
    });
    mirror.notify();
    // The background round's end, not a fixed delay: the machine may be loaded.
    await vi.waitFor(() => expect(errors).toHaveLength(1), { timeout: 20_000 });
    expect(await storedCheckpointSteps(store, 'run-2')).toEqual([]);
    await mirror.flush();
    expect(await storedCheckpointSteps(store, 'run-2')).toEqual([1]);
  });
});

describe('publishing a run artifact and materializing its worktrees on another node', () => {
  it('publishRunArtifact puts a local artifact with its manifest into the store, once', async () => {
    const storeDir = fresh('store');
    const file = path.join(fresh('node-a'), 'samples.parquet');
    const ref = await writeParquetArtifact({
      path: file,
      schemaName: 'test-samples',
      schemaVersion: 1,
      arrowSchema: new arrow.Schema([new arrow.Field('instanceId', new arrow.Utf8(), false)]),
      rows: [{ instanceId: 'a' }, { instanceId: 'b' }],
      inputs: [],
      configHash: hashConfig({ t: 2 }),
    });
    const published = await publishRunArtifact(
      openArtifactStore(fileStoreUri(storeDir)),
      'run-3/environment/samples.parquet',
      ref,
      storeSettingsFromEnv({}),
    );
    expect(published).toEqual({ ...ref, uri: fileStoreUri(path.join(storeDir, 'run-3/environment/samples.parquet')) });
    expect(existsSync(path.join(storeDir, 'run-3/environment/samples.parquet.manifest.json'))).toBe(true);
    expect(
      await publishRunArtifact(
        openArtifactStore(fileStoreUri(storeDir)),
        'run-3/environment/samples.parquet',
        published,
        storeSettingsFromEnv({}),
      ),
    ).toBe(published);
    const rows: unknown[] = [];
    for await (const r of readRows(published.uri)) rows.push('row' in r ? r.row : r);
    expect(rows).toEqual([{ instanceId: 'a' }, { instanceId: 'b' }]);
  });

  it("materializeSampleWorktrees makes each (repo, base commit) worktree in the node's own data dir and maps the rows to it", async () => {
    const root = fresh('repos');
    const repo = await createSyntheticRepo(path.join(root, 'src'), { files: 3, commits: 3 });
    await bareMirror(repo.dir, path.join(root, 'mirrors', 'acme__widgets.git'));
    const samples = path.join(root, 'samples.jsonl');
    const rows = [
      { instanceId: 'i1', repo: 'acme/widgets', baseCommit: repo.commits[0], worktreePath: '/cpu-node/worktrees/acme__widgets/x' },
      { instanceId: 'i2', repo: 'acme/widgets', baseCommit: repo.commits[2], worktreePath: '/cpu-node/worktrees/acme__widgets/y' },
      { instanceId: 'i3', repo: 'acme/widgets', baseCommit: repo.commits[0], worktreePath: '/cpu-node/worktrees/acme__widgets/x' },
      { instanceId: 'i4', repo: 'acme/widgets', baseCommit: repo.commits[1], worktreePath: null },
    ];
    writeFileSync(samples, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const dataDir = fresh('gpu-data');
    const made = await materializeSampleWorktrees(samples, {
      repoSource: { kind: 'mirror-dir', dir: path.join(root, 'mirrors') },
      dataDir,
      storeSettings: storeSettingsFromEnv({}),
    });
    expect(made.failed).toEqual([]);
    expect(made.results).toHaveLength(2);
    const w1 = made.worktreePath(rows[0]!)!;
    expect(w1).toBe(path.join(dataDir, 'worktrees', 'acme__widgets', repo.commits[0]!));
    expect(readFileSync(path.join(w1, 'VERSION'), 'utf8')).toBe('0\n');
    expect(readFileSync(path.join(made.worktreePath(rows[1]!)!, 'VERSION'), 'utf8')).toBe('2\n');
    expect(made.worktreePath(rows[2]!)).toBe(w1);
    expect(made.worktreePath(rows[3]!)).toBeNull();
  });
});
