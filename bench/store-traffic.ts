/**
 * Store traffic of a training segment's push path (lib/store-sync/run-mirror.ts) over a long run: bytes put
 * to the store per push must stay flat as the run grows (logs go up as appended parts, README "Deployment"),
 * where re-uploading each whole log made them grow with the run, and the run's traffic with its square.
 *
 *   npm run bench -- store-traffic
 *
 * The trainer is not run (200 real steps take far too long on a CPU machine): a synthetic segment writes what
 * it writes, at realistic sizes — one step line of the trainer's metrics per step (~0.8 KB, trainer/train.py),
 * a stderr line every few steps, a checkpoint every BENCH_CHECKPOINT_EVERY steps of BENCH_CHECKPOINT_MB
 * (adapter + optimizer state, pruned locally to the newest 3 like the trainer) — and the mirror pushes after
 * every step, as the trainer's step lines make it. An instrumented store counts the bytes of every put. The
 * reference in the same invocation is what the previous push path sent: each changed log whole.
 *
 * Env: BENCH_STEPS (200), BENCH_CHECKPOINT_EVERY (10), BENCH_CHECKPOINT_MB (8), BENCH_S3=0 skips SeaweedFS
 * (run when its binary is built: .tools/bin/weed or CODEGREP_WEED_BIN).
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileStoreUri, openArtifactStore, type ArtifactStore, type S3StoreSettings } from '../lib/artifacts/store';
import { SegmentMirror, storedCheckpointSteps } from '../lib/store-sync';
import { repoRoot } from '../test/support/repo-root';

const STEPS = Number(process.env.BENCH_STEPS ?? 200);
const CHECKPOINT_EVERY = Number(process.env.BENCH_CHECKPOINT_EVERY ?? 10);
const CHECKPOINT_MB = Number(process.env.BENCH_CHECKPOINT_MB ?? 8);
const KEEP = 3;

function emit(line: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'store-traffic', ...line }));
}

/** Counts the bytes of every write to `store`; `take()` returns and resets the count. */
function countingStore(store: ArtifactStore): { store: ArtifactStore; take: () => { bytes: number; puts: number } } {
  let bytes = 0;
  let puts = 0;
  const size = (content: Uint8Array | string) => (typeof content === 'string' ? Buffer.byteLength(content) : content.byteLength);
  return {
    take: () => {
      const out = { bytes, puts };
      bytes = 0;
      puts = 0;
      return out;
    },
    store: {
      ...store,
      putBytes: async (key, content) => ((bytes += size(content)), (puts += 1), store.putBytes(key, content)),
      putBytesIfAbsent: async (key, content) => ((bytes += size(content)), (puts += 1), store.putBytesIfAbsent(key, content)),
      putFile: async (key, file) => ((bytes += (await stat(file)).size), (puts += 1), store.putFile(key, file)),
    },
  };
}

/** A step line the size of the trainer's (trainer/train.py `emit("step", **metrics)`). */
function stepLine(step: number): string {
  const metrics: Record<string, number | string | null> = { event: 'step', step, epoch: Math.floor(step / 50) };
  for (const name of [
    'reward_mean',
    'reward_std',
    'reward_max',
    'file_f1',
    'module_f1',
    'function_f1',
    'turns_mean',
    'tool_calls_mean',
    'answered_ratio',
    'truncated_ratio',
    'kl',
    'loss',
    'clip_ratio',
    'grad_norm',
    'lr',
    'sampler_logprob_diff',
    'is_weight_mean',
    'step_time_s',
    'rollout_time_s',
    'env_time_s',
    'update_time_s',
    'rollout_tokens',
    'train_tokens',
    'rollout_tokens_per_s',
    'train_tokens_per_s',
    'peak_gpu_mem_gb',
  ])
    metrics[name] = Math.sin(step * name.length) * 1000 + 0.123456789;
  metrics.checkpoint =
    step % CHECKPOINT_EVERY === 0 ? `/data/run/training/trainer/checkpoints/step-${String(step).padStart(8, '0')}` : null;
  return `${JSON.stringify(metrics)}\n`;
}

function writeCheckpoint(runDir: string, step: number): void {
  const checkpoints = path.join(runDir, 'training/trainer/checkpoints');
  const dir = path.join(checkpoints, `step-${String(step).padStart(8, '0')}`);
  mkdirSync(dir, { recursive: true });
  const total = Math.round(CHECKPOINT_MB * 1024 * 1024);
  writeFileSync(path.join(dir, 'adapter_model.safetensors'), Buffer.alloc(Math.round(total / 3), step % 251));
  writeFileSync(path.join(dir, 'optimizer.pt'), Buffer.alloc(total - Math.round(total / 3), step % 241));
  writeFileSync(path.join(dir, 'trainer_state.json'), JSON.stringify({ step, rng: 'x'.repeat(2000) }));
  writeFileSync(path.join(dir, 'COMPLETE'), '');
  // The trainer prunes its own disk to the newest `keep` (trainer/checkpoint.py prune_checkpoints).
  const all = readdirSync(checkpoints).sort();
  for (const old of all.slice(0, Math.max(0, all.length - KEEP))) rmSync(path.join(checkpoints, old), { recursive: true, force: true });
}

const mean = (xs: number[]) => (xs.length === 0 ? NaN : xs.reduce((a, b) => a + b, 0) / xs.length);
/** Least-squares slope of ys against 0..n-1. */
function slope(ys: number[]): number {
  const n = ys.length;
  const mx = (n - 1) / 2;
  const my = mean(ys);
  let num = 0;
  let den = 0;
  ys.forEach((y, x) => {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  });
  return den === 0 ? 0 : num / den;
}

async function run(kind: string, plain: ArtifactStore, work: string): Promise<void> {
  const { store, take } = countingStore(plain);
  const runDir = path.join(work, `${kind}-node`, 'run');
  const seg = path.join(runDir, 'training/segments/segment-0001');
  mkdirSync(seg, { recursive: true });
  const stdout = path.join(seg, 'attempt-01.stdout.jsonl');
  const stderr = path.join(seg, 'attempt-01.stderr.log');
  writeFileSync(path.join(seg, 'attempt-01.config.json'), JSON.stringify({ total_steps: STEPS, padding: 'c'.repeat(1500) }));
  writeFileSync(stdout, `${JSON.stringify({ event: 'start', step: 0, parameters: 596_049_920, device: 'cuda' })}\n`);
  writeFileSync(stderr, 'loading model\n');
  const mirror = new SegmentMirror({ store, runId: 'bench-run', localRunDir: runDir, segment: 1, attempt: 1, startedAt: Date.now() });
  await mirror.pull();
  take();
  const started = performance.now();
  const logPush: number[] = [];
  const checkpointPush: number[] = [];
  const reference: number[] = [];
  const pushed = new Map<string, number>();
  for (let step = 1; step <= STEPS; step++) {
    if (step % CHECKPOINT_EVERY === 0) writeCheckpoint(runDir, step);
    writeFileSync(stdout, stepLine(step), { flag: 'a' });
    if (step % 5 === 0) writeFileSync(stderr, `step ${step}: rollout batch of 16 prompts, 3 truncated at max_new_tokens\n`, { flag: 'a' });
    // The previous push path: every log that changed since the last push, whole.
    let whole = 0;
    for (const name of readdirSync(seg)) {
      const size = statSync(path.join(seg, name)).size;
      if (pushed.get(name) !== size) whole += size;
      pushed.set(name, size);
    }
    reference.push(whole);
    await mirror.flush();
    const round = mirror.traffic.at(-1)!;
    const sent = take();
    (round.markers > 0 ? checkpointPush : logPush).push(sent.bytes);
    if (step % 50 === 0)
      emit({ store: kind, step, bytes_this_push: sent.bytes, log_part_bytes: round.logBytes, reference_whole_log_bytes: whole });
  }
  const wallS = (performance.now() - started) / 1000;
  const first = logPush.slice(0, 20);
  const last = logPush.slice(-20);
  const refFirst = reference.slice(0, 20);
  const refLast = reference.slice(-20);
  const kb = (x: number) => Math.round(x / 102.4) / 10;
  emit({
    store: kind,
    steps: STEPS,
    pushes: logPush.length + checkpointPush.length,
    synthetic: true,
    checkpoint_mb: CHECKPOINT_MB,
    checkpoint_every: CHECKPOINT_EVERY,
    log_push_kb: {
      first_20_mean: kb(mean(first)),
      last_20_mean: kb(mean(last)),
      last_over_first: Math.round((mean(last) / mean(first)) * 100) / 100,
    },
    log_push_slope_bytes_per_push: Math.round(slope(logPush) * 100) / 100,
    checkpoint_push_mb: {
      first: Math.round((checkpointPush[0] ?? NaN) / 1024 / 10.24) / 100,
      last: Math.round((checkpointPush.at(-1) ?? NaN) / 1024 / 10.24) / 100,
    },
    reference_whole_log_push_kb: {
      first_20_mean: kb(mean(refFirst)),
      last_20_mean: kb(mean(refLast)),
      last_over_first: Math.round((mean(refLast) / mean(refFirst)) * 100) / 100,
    },
    total_log_mb: Math.round(logPush.reduce((a, b) => a + b, 0) / 1024 / 10.24) / 100,
    reference_total_log_mb: Math.round(reference.reduce((a, b) => a + b, 0) / 1024 / 10.24) / 100,
    stored_checkpoints_at_end: await storedCheckpointSteps(plain, 'bench-run'),
    wall_s: Math.round(wallS * 10) / 10,
  });
}

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-bench-store-traffic-'));
try {
  await run('file', openArtifactStore(fileStoreUri(path.join(work, 'store'))), work);
  const weed = process.env.CODEGREP_WEED_BIN ?? path.join(repoRoot, '.tools/bin/weed');
  if (process.env.BENCH_S3 === '0') emit({ store: 's3', skipped: 'BENCH_S3=0' });
  else if (!existsSync(weed)) emit({ store: 's3', skipped: `no SeaweedFS binary at ${weed} (scripts/ensure-seaweedfs.sh builds it)` });
  else {
    const { startSeaweedS3 } = await import('../test/support/seaweedfs');
    const server = await startSeaweedS3(path.join(work, 'weed'));
    try {
      await server.createBucket('bench');
      const settings: S3StoreSettings = {
        endpoint: server.endpoint,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
      };
      await run('s3-seaweedfs', openArtifactStore('s3://bench/traffic', settings), work);
    } finally {
      // The server process is unref'd: something must keep the event loop up until its exit is seen.
      const keepAlive = setInterval(() => undefined, 1000);
      await server.stop();
      clearInterval(keepAlive);
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
