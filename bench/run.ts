/**
 * `npm run bench [-- name …]`: runs the benchmarks one after another, each in its own process (so one's memory
 * never counts against another's peak RSS), and passes their JSON lines through. Each benchmark compares
 * against a reference run in the same invocation and reports the ratio; BENCHMARKS.md summarises the figures.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const benches: Record<string, { file: string; what: string }> = {
  'read-rows': { file: 'read-rows.ts', what: 'streaming JSONL/Parquet reader: peak RSS on a 160 MB file' },
  mining: { file: 'mining.ts', what: 'CATM mining vs a JSON-parse-only pass (≥ 5,000 trajectories)' },
  judge: { file: 'judge.ts', what: 'judge wall time vs the ideal N/16 × 200 ms' },
  bm25: { file: 'bm25.ts', what: 'BM25 index + queries vs rank_bm25' },
  tools: { file: 'tools.ts', what: 'grep/glob/read latency vs raw rg at concurrency 1 and 64' },
  'sandbox-lag': {
    file: 'sandbox-lag.ts',
    what: 'event-loop lag of hostile in-process sandbox cases (blank-line floods, long-name globs)',
  },
  isolation: { file: 'isolation.ts', what: 'extra time per tool call of the bubblewrap sandbox (namespace vs filter-only)' },
  'tools-load': {
    file: 'tools-load.ts',
    what: '200 concurrent mixed tool calls over a 120k-file tree: timeouts, loop lag, abort latency; spawner helper vs in-process spawn',
  },
  dense: { file: 'dense.ts', what: 'dense embedding throughput on CPU' },
  fetch: { file: 'fetch.ts', what: 'empty bare repo + fetch --depth=1 per base commit vs a full clone, over file:// (../shared/repos)' },
  train: {
    file: 'train.ts',
    what: 'trainer on a tiny random Qwen3 (CPU): rollout vs plain generate, env share, update MFU vs measured matmul rate',
  },
  'store-traffic': {
    file: 'store-traffic.ts',
    what: 'bytes put to the store per push over a 200-step synthetic segment (file://, and SeaweedFS when built) vs whole-log re-upload',
  },
  learn: {
    file: 'learn.ts',
    what: 'learning shown on the real pipeline: component repos → RFT (scripted teacher) → GRPO; held-out Fβ of start, RFT, GRPO',
  },
  worktrees: { file: 'worktrees.ts', what: 'worktree add median/p95 and disk vs full clones (BENCH_REPO_DIR for a real repository)' },
  scale: {
    file: 'scale.ts',
    what: 'BM25 over 13/52/203 SWE-bench Verified instances from full bare mirrors: cold, warm, one new commit; dense CPU rate',
  },
};

// `npm run bench -- scale --mirrors DIR`: the names come first; everything from the first `--flag` on goes to each bench.
const argv = process.argv.slice(2);
const firstFlag = argv.findIndex((a) => a.startsWith('--'));
const requested = firstFlag < 0 ? argv : argv.slice(0, firstFlag);
const benchArgs = firstFlag < 0 ? [] : argv.slice(firstFlag);
const unknown = requested.filter((name) => !(name in benches));
if (unknown.length > 0) {
  console.error(`unknown benchmark(s): ${unknown.join(', ')}; known: ${Object.keys(benches).join(', ')}`);
  process.exit(2);
}
const names = requested.length > 0 ? requested : Object.keys(benches);

let failures = 0;
for (const name of names) {
  const bench = benches[name]!;
  console.error(`\n== bench ${name}: ${bench.what}`);
  const code = await new Promise<number>((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, bench.file), ...benchArgs], { stdio: 'inherit' });
    child.once('exit', (exitCode) => resolve(exitCode ?? 1));
  });
  if (code !== 0) {
    failures++;
    console.log(JSON.stringify({ bench: name, error: `exited with code ${code}` }));
  }
}
process.exit(failures > 0 ? 1 : 0);
