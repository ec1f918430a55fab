/**
 * Throughput of the dense retriever (lib/retrievers/dense) on the CPU, against PyTorch running the same
 * model on the same token sequences in the same invocation.
 *
 *   npx tsx bench/dense.ts [--size tiny|minilm|all] [--files 500] [--lines 30] [--batch 16] [--threads 2] [--queries 20]
 *
 * (default: tiny; `--size minilm --files 100` takes minutes on 2 cores, PyTorch included)
 *
 * Model: made by test/python/make_tiny_embedding_model.py (random weights, nothing downloaded): `tiny` is the
 * tests' 2-layer hidden-32 BERT (max 32 tokens), `minilm` has all-MiniLM-L6-v2's shape (6 layers, hidden
 * 384, max 256 tokens); its WordPiece vocabulary is small, so a line makes more tokens than with the real
 * MiniLM: compare tokens/s, not files/s, with other models.
 * Corpus: the lines of node_modules/typescript/lib/*.d.ts, cut into --files files of --lines lines.
 * Phases (one JSON line each): tokenize (tokenizer only), index (tokenize + chunk + embed, as
 * indexWorktreeDense does after reading files; inference_seconds is the part spent in onnxruntime + pooling),
 * reference (the same sequences through PyTorch, same batching and threads: seconds of forward + pooling,
 * and the largest difference of the vectors; on a shared machine the CPU-second ratio is the steadier one), cache (indexing the same files again from the Parquet cache),
 * query (retrieveDense latency for SWE-bench Verified problem statements). The last line holds the ratios.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SourceFile } from '../lib/retrievers/bm25/retriever';
import { buildDenseIndex } from '../lib/retrievers/dense/dense-index';
import { loadEmbeddingModel, releaseEmbeddingModel, wrapTokens } from '../lib/retrievers/dense/embedding-model';
import { retrieveDense } from '../lib/retrievers/dense/retrieve';
import { fixtureModel, VENV_PYTHON, type FixtureModelSize } from '../test/fixtures/retrievers/dense-fixture';
import { repoRoot } from '../test/support/repo-root';

interface Args {
  sizes: FixtureModelSize[];
  files: number;
  lines: number;
  batch: number;
  threads: number;
  queries: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { sizes: ['tiny'], files: 500, lines: 30, batch: 16, threads: 2, queries: 20 };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--size') {
      if (value !== 'tiny' && value !== 'minilm' && value !== 'all') throw new Error(`--size must be tiny, minilm or all, got ${value}`);
      args.sizes = value === 'all' ? ['tiny', 'minilm'] : [value];
    } else if (flag === '--files' || flag === '--lines' || flag === '--batch' || flag === '--threads' || flag === '--queries') {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer, got ${value}`);
      args[flag.slice(2) as 'files' | 'lines' | 'batch' | 'threads' | 'queries'] = n;
    } else throw new Error(`unknown argument ${flag} (expected --size, --files, --lines, --batch, --threads, --queries)`);
  }
  return args;
}

function corpus(files: number, linesPerFile: number): SourceFile[] {
  const dir = path.join(repoRoot, 'node_modules/typescript/lib');
  const lines = readdirSync(dir)
    .filter((f) => f.endsWith('.d.ts'))
    .sort()
    .flatMap((f) => readFileSync(path.join(dir, f), 'utf8').split('\n'));
  if (lines.length < files * linesPerFile) throw new Error(`${dir} has ${lines.length} lines, fewer than ${files} × ${linesPerFile}`);
  return Array.from({ length: files }, (_, i) => ({
    path: `lib/part_${String(i).padStart(4, '0')}.ts`,
    content: lines.slice(i * linesPerFile, (i + 1) * linesPerFile).join('\n'),
  }));
}

function queries(n: number): string[] {
  return readFileSync(path.resolve(repoRoot, '../shared/data/swebench_verified.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .slice(0, n)
    .map((l) => (JSON.parse(l) as { problem_statement: string }).problem_statement);
}

const round = (x: number, digits = 3): number => Number(x.toFixed(digits));
const cpuSeconds = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

async function timed<T>(work: () => Promise<T> | T): Promise<{ value: T; seconds: number; cpuSeconds: number }> {
  const wall = performance.now();
  const cpu = cpuSeconds();
  const value = await work();
  return { value, seconds: (performance.now() - wall) / 1000, cpuSeconds: cpuSeconds() - cpu };
}

function print(record: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'dense', ...record }));
}

async function benchSize(size: FixtureModelSize, args: Args, files: SourceFile[], questions: string[]): Promise<void> {
  const fixture = await fixtureModel(size);
  const model = await loadEmbeddingModel(fixture.modelDir, { batchSize: args.batch, intraOpNumThreads: args.threads });
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'bench-dense-'));
  try {
    const base = {
      size,
      files: files.length,
      lines_per_file: args.lines,
      batch: args.batch,
      threads: args.threads,
      max_seq_length: model.folder.maxSequenceLength,
    };

    const tokenize = await timed(() => files.map((f) => model.tokenizer.encode(f.content)));
    const contentTokens = tokenize.value.reduce((n, ids) => n + ids.length, 0);
    print({
      ...base,
      phase: 'tokenize',
      seconds: round(tokenize.seconds),
      cpu_seconds: round(tokenize.cpuSeconds),
      content_tokens: contentTokens,
      tokens_per_s: round(contentTokens / tokenize.seconds, 0),
    });

    const index = await timed(() => buildDenseIndex(files, 'bench', model));
    const { stats } = index.value;
    const modelTokens = model.stats.tokensEmbedded;
    const inferenceSeconds = model.stats.inferenceMs / 1000;
    print({
      ...base,
      phase: 'index',
      seconds: round(index.seconds),
      cpu_seconds: round(index.cpuSeconds),
      chunks: stats.chunks,
      model_tokens: modelTokens,
      session_runs: model.stats.sessionRuns,
      inference_seconds: round(inferenceSeconds),
      files_per_s: round(files.length / index.seconds, 1),
      content_tokens_per_s: round(contentTokens / index.seconds, 0),
      inference_tokens_per_s: round(modelTokens / inferenceSeconds, 0),
    });

    // The index's own sequences, in chunk order (= the rows of index.embeddings), for PyTorch.
    const sequences = index.value.chunkSpans.map((span, c) =>
      wrapTokens(model, tokenize.value[index.value.chunkFile[c]!]!.slice(span.start, span.end), 'document'),
    );
    const specPath = path.join(tmp, 'spec.json');
    const compare = Math.min(200, sequences.length);
    writeFileSync(
      specPath,
      JSON.stringify({ model_dir: fixture.modelDir, sequences, batch_size: args.batch, threads: args.threads, return: compare }),
    );
    const run = spawnSync(VENV_PYTHON, [path.join(repoRoot, 'test/python/dense_bench_reference.py'), specPath], {
      encoding: 'utf8',
      maxBuffer: 1 << 30,
    });
    if (run.status !== 0) throw new Error(`dense_bench_reference.py failed (exit ${run.status}): ${run.stderr.slice(-2000)}`);
    const reference = JSON.parse(run.stdout) as { seconds: number; cpu_seconds: number; embeddings: number[][] };
    let worst = 0;
    const d = index.value.dimension;
    reference.embeddings.forEach((v, i) =>
      v.forEach((x, j) => (worst = Math.max(worst, Math.abs(x - index.value.embeddings[i * d + j]!)))),
    );
    print({
      ...base,
      phase: 'reference',
      engine: 'pytorch',
      seconds: round(reference.seconds),
      cpu_seconds: round(reference.cpu_seconds),
      tokens_per_s: round(modelTokens / reference.seconds, 0),
      max_abs_difference: worst,
      compared_vectors: compare,
    });

    const cacheDir = path.join(tmp, 'cache');
    await buildDenseIndex(files, 'bench', model, { cacheDir });
    const runs = model.stats.sessionRuns;
    const cached = await timed(() => buildDenseIndex(files, 'bench', model, { cacheDir }));
    print({
      ...base,
      phase: 'cache',
      seconds: round(cached.seconds),
      cached_files: cached.value.stats.cachedFiles,
      session_runs: model.stats.sessionRuns - runs,
      files_per_s: round(files.length / cached.seconds, 0),
    });

    const latencies: number[] = [];
    for (const q of questions) latencies.push((await timed(() => retrieveDense(index.value, q))).seconds * 1000);
    latencies.sort((a, b) => a - b);
    print({
      ...base,
      phase: 'query',
      queries: latencies.length,
      p50_ms: round(latencies[Math.floor(latencies.length / 2)]!, 2),
      max_ms: round(latencies.at(-1)!, 2),
    });

    print({
      ...base,
      phase: 'summary',
      pytorch_over_onnxruntime_seconds: round(reference.seconds / inferenceSeconds, 2),
      // Our CPU seconds of inference, estimated as index minus tokenisation (same process, ORT threads included).
      pytorch_over_onnxruntime_cpu_seconds: round(reference.cpu_seconds / Math.max(1e-9, index.cpuSeconds - tokenize.cpuSeconds), 2),
      index_files_per_s: round(files.length / index.seconds, 1),
      inference_share_of_index: round(inferenceSeconds / index.seconds, 2),
    });
  } finally {
    await releaseEmbeddingModel(model);
    rmSync(tmp, { recursive: true, force: true });
  }
}

export async function runDenseBench(args: Args): Promise<void> {
  const files = corpus(args.files, args.lines);
  const questions = queries(args.queries);
  for (const size of args.sizes) await benchSize(size, args, files, questions);
}

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === path.resolve(repoRoot, 'bench/dense.ts')) {
  runDenseBench(parseArgs(process.argv.slice(2))).catch((error: Error) => {
    console.error(error.message);
    process.exitCode = 1;
  });
}
