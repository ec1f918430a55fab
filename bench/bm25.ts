/**
 * Our BM25 (lib/retrievers/bm25) against the real rank_bm25 on the same corpus and queries, in one run.
 *
 *   npx tsx bench/bm25.ts [--root DIR] [--queries N] [--top N]
 *
 * Corpus: the App. E file set of DIR (default: numpy's package in the project venv, real Python source that
 * every setup has because rank_bm25 needs it; pass a materialised SWE-bench worktree for the real thing).
 * Queries: SWE-bench Verified problem statements (../shared/data). Both sides do the same work from raw
 * text: tokenize + build the content and path indexes, then per query tokenize + score (content + 2 × path)
 * + rank. Python times itself (perf_counter, process_time), so interpreter start, imports and JSON transfer
 * are excluded; file reading is excluded on both sides. Wall-clock and CPU time are both reported: on a
 * shared machine CPU time is the steadier comparison. Rankings are compared on the first `--top` ids of
 * every query. Our first build is cold (JIT not warmed up); a second build is timed as "warm". Prints JSON
 * lines; the last one holds the ratios.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { quantile } from '../lib/metrics/summary';
import { PATH_INDEX_WEIGHT } from '../lib/retrievers/bm25/params';
import { topKIndices } from '../lib/retrievers/bm25/ranking';
import { bm25ScoresForTokens, buildBm25Index } from '../lib/retrievers/bm25/retriever';
import { tokenize } from '../lib/retrievers/bm25/tokenizer';
import { collectWorktreeFiles } from '../lib/retrievers/bm25/worktree';
import { REPO_ROOT, runBm25Reference } from '../test/python/run-bm25-reference';

interface Args {
  root: string;
  queries: number;
  top: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { root: path.join(REPO_ROOT, '.venv/lib/python3.11/site-packages/numpy'), queries: 100, top: 50 };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--root') args.root = value;
    else if (flag === '--queries') args.queries = Number(value);
    else if (flag === '--top') args.top = Number(value);
    else throw new Error(`unknown argument ${flag} (expected --root, --queries, --top)`);
    i++;
  }
  if (!Number.isInteger(args.queries) || args.queries < 1) throw new Error(`--queries must be a positive integer`);
  if (!Number.isInteger(args.top) || args.top < 1) throw new Error(`--top must be a positive integer`);
  return args;
}

/** The q-quantile of unsorted values (lib/metrics' quantile: linear interpolation, numpy's default). */
function percentile(values: number[], q: number): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    q,
  );
}

const round = (x: number, digits = 3): number => Number(x.toFixed(digits));

export async function runBm25Bench(args: Args): Promise<void> {
  const { files, skipped } = await collectWorktreeFiles(args.root);
  const queries = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(0, args.queries)
    .map((l) => (JSON.parse(l) as { problem_statement: string }).problem_statement);
  const bytes = files.reduce((sum, f) => sum + Buffer.byteLength(f.content), 0);

  const cpuMs = (since: NodeJS.CpuUsage): number => {
    const used = process.cpuUsage(since);
    return (used.user + used.system) / 1000;
  };
  const buildStart = performance.now();
  const buildCpuStart = process.cpuUsage();
  const index = buildBm25Index(files);
  const buildMs = performance.now() - buildStart;
  const buildCpuMs = cpuMs(buildCpuStart);
  // A long-lived worker builds many indexes: the second build shows the cost once the JIT has warmed up.
  const warmCpuStart = process.cpuUsage();
  buildBm25Index(files);
  const warmBuildCpuMs = cpuMs(warmCpuStart);
  const ours: number[][] = [];
  const oursQueryMs: number[] = [];
  const scores = new Float64Array(files.length);
  const queriesCpuStart = process.cpuUsage();
  for (const query of queries) {
    const t0 = performance.now();
    bm25ScoresForTokens(index, tokenize(query), scores);
    const ranked = topKIndices(scores, args.top);
    oursQueryMs.push(performance.now() - t0);
    ours.push(ranked);
  }
  const oursQueriesCpuMs = cpuMs(queriesCpuStart);
  const oursQueryTotal = oursQueryMs.reduce((a, b) => a + b, 0);

  const reference = runBm25Reference({
    mode: 'raw',
    docs: files.map((f) => f.content),
    paths: index.paths,
    path_weight: PATH_INDEX_WEIGHT,
    queries,
    emit_scores: false,
    top: args.top,
  });
  const pythonBuildMs = reference.timing.build_s * 1000;
  const pythonQueryMs = reference.timing.query_s.map((s) => s * 1000);
  const pythonQueryTotal = pythonQueryMs.reduce((a, b) => a + b, 0);
  const pythonBuildCpuMs = reference.timing.build_cpu_s * 1000;
  const pythonQueriesCpuMs = reference.timing.queries_cpu_s * 1000;

  const mismatched = ours.flatMap((ranking, q) => (JSON.stringify(ranking) === JSON.stringify(reference.rankings[q]) ? [] : [q]));
  const common = {
    bench: 'bm25',
    root: args.root,
    files: files.length,
    skipped: skipped.length,
    megabytes: round(bytes / 1e6, 1),
    queries: queries.length,
  };
  const line = (o: object): void => console.log(JSON.stringify({ ...common, ...o }));
  line({
    impl: 'codegrep-ts',
    build_ms: round(buildMs),
    query_total_ms: round(oursQueryTotal),
    query_p50_ms: round(percentile(oursQueryMs, 0.5)),
    query_p95_ms: round(percentile(oursQueryMs, 0.95)),
    build_cpu_ms: round(buildCpuMs),
    build_warm_cpu_ms: round(warmBuildCpuMs),
    queries_cpu_ms: round(oursQueriesCpuMs),
  });
  line({
    impl: 'rank_bm25',
    build_ms: round(pythonBuildMs),
    query_total_ms: round(pythonQueryTotal),
    query_p50_ms: round(percentile(pythonQueryMs, 0.5)),
    query_p95_ms: round(percentile(pythonQueryMs, 0.95)),
    build_cpu_ms: round(pythonBuildCpuMs),
    queries_cpu_ms: round(pythonQueriesCpuMs),
  });
  line({
    impl: 'ratio',
    speedup_total: round((pythonBuildMs + pythonQueryTotal) / (buildMs + oursQueryTotal), 2),
    speedup_build: round(pythonBuildMs / buildMs, 2),
    speedup_query: round(pythonQueryTotal / oursQueryTotal, 2),
    speedup_total_cpu: round((pythonBuildCpuMs + pythonQueriesCpuMs) / (buildCpuMs + oursQueriesCpuMs), 2),
    speedup_build_cpu: round(pythonBuildCpuMs / buildCpuMs, 2),
    speedup_build_warm_cpu: round(pythonBuildCpuMs / warmBuildCpuMs, 2),
    speedup_query_cpu: round(pythonQueriesCpuMs / oursQueriesCpuMs, 2),
    rankings_compared_top: args.top,
    identical_rankings: mismatched.length === 0,
    mismatched_queries: mismatched,
  });
  if (mismatched.length > 0) process.exitCode = 1;
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(REPO_ROOT, 'bench/bm25.ts')) {
  runBm25Bench(parseArgs(process.argv.slice(2))).catch((error: Error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
