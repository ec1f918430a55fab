/**
 * `npm run bench -- scale [--mirrors DIR] [--sizes 13,52,203] [--dense-blobs N] [--model DIR] [--out DIR]`
 *
 * BM25 (and a dense rate sample) at the papers' data size, from full bare mirrors with no worktree: SWE-bench
 * Verified instances (../shared/data/swebench_verified.jsonl) of sympy, sphinx, astropy, xarray, pytest,
 * pylint, requests, seaborn and flask (203 instances), in nested subsets of 13, 52 and 203 (ordered by a hash
 * of the instance id, so each subset spreads over the repositories). `--mirrors DIR` holds `<owner>+<name>/repo`
 * bare git dirs (the layout of /work/.mirror, the default) or `<owner>__<name>.git`; the bench links them into
 * a temp folder of `<owner>__<name>.git`, the layout `environment.repoSource: { kind: mirror-dir }` reads.
 *
 * Per size, each stage runs in its own process (so its peak RSS is its own):
 *   bm25-cold   empty blob-terms cache: every distinct blob of the commits' corpora is read and tokenized once
 *   bm25-warm   the same again: nothing is tokenized (the commits' indexes are rebuilt from cached counts)
 *   new-commit  (largest size) one commit outside the set: only its blobs never seen before are tokenized;
 *               the expected number is computed from the tree listings alone
 *   dense-rate  (smallest size, with a model) embeds `--dense-blobs` blobs with all-MiniLM-L6-v2 on the CPU:
 *               blobs/s and chunks/s, and the whole-repository estimate for every size
 * Each line: wall time, CPU (the process and its main thread), peak RSS, cache disk, files listed / documents /
 * distinct blobs / blobs tokenized, the machine's load average; the largest size also prints BM25 top-2 file P / R / Fβ (β = 0.5) with 95 % bootstrap
 * intervals against the gold patches (CodeGrep App. B).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bootstrapCI, fileScores, mean } from '../lib/metrics';
import { goldFilesFromPatch } from '../lib/patch/parse-diff';
import { BlobTermStore, blobTermsDir } from '../lib/retrievers/bm25/blob-terms';
import { listCommitFiles, type CommitFiles } from '../lib/retrievers/bm25/commit-files';
import { indexCommit } from '../lib/retrievers/bm25/commit-index';
import { DEFAULT_TOP_K } from '../lib/retrievers/bm25/params';
import { retrieveTopK } from '../lib/retrievers/bm25/retriever';
import { BlobReader } from '../lib/worktrees/cat-file';
import { git } from '../lib/worktrees/git';
import { parseRepoName } from '../lib/worktrees/repo-name';

const here = path.dirname(fileURLToPath(import.meta.url));
const REPO_ROOT = path.resolve(here, '..');
const REPOS = [
  'sympy/sympy',
  'sphinx-doc/sphinx',
  'astropy/astropy',
  'pydata/xarray',
  'pytest-dev/pytest',
  'pylint-dev/pylint',
  'psf/requests',
  'mwaskom/seaborn',
  'pallets/flask',
];

interface Instance {
  instance_id: string;
  repo: string;
  base_commit: string;
  problem_statement: string;
  patch: string;
}

interface Args {
  mirrors: string;
  sizes: number[];
  denseBlobs: number;
  model: string;
  out: string | null;
  instances: string;
}

function parseArgs(argv: string[]): Args & { child: string | null; size: number; work: string } {
  const args = {
    mirrors: '/work/.mirror',
    sizes: [13, 52, 203],
    denseBlobs: 300,
    model: path.join(REPO_ROOT, '.models/all-MiniLM-L6-v2'),
    out: null as string | null,
    instances: path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'),
    child: null as string | null,
    size: 0,
    work: '',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!;
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--mirrors') args.mirrors = path.resolve(value);
    else if (flag === '--sizes') args.sizes = value.split(',').map(Number);
    else if (flag === '--dense-blobs') args.denseBlobs = Number(value);
    else if (flag === '--model') args.model = path.resolve(value);
    else if (flag === '--out') args.out = path.resolve(value);
    else if (flag === '--instances') args.instances = path.resolve(value);
    else if (flag === '--child') args.child = value;
    else if (flag === '--size') args.size = Number(value);
    else if (flag === '--work') args.work = value;
    else throw new Error(`unknown argument ${flag} (expected --mirrors, --sizes, --dense-blobs, --model, --out, --instances)`);
  }
  if (args.sizes.some((s) => !Number.isInteger(s) || s < 1))
    throw new Error(`--sizes must be positive integers, got ${args.sizes.join(',')}`);
  return args;
}

function loadInstances(file: string): Instance[] {
  const wanted = new Set(REPOS);
  const rows = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Instance)
    .filter((r) => wanted.has(r.repo));
  const key = (r: Instance) => createHash('sha256').update(r.instance_id).digest('hex');
  return rows.sort((a, b) => (key(a) < key(b) ? -1 : 1));
}

/** A temp folder of `<owner>__<name>.git` links to the mirrors (either layout). */
function linkMirrors(mirrors: string, into: string): string {
  const dir = path.join(into, 'mirrors');
  mkdirSync(dir, { recursive: true });
  for (const repo of REPOS) {
    const { owner, name, slug } = parseRepoName(repo);
    const candidates = [path.join(mirrors, `${owner}+${name}`, 'repo'), path.join(mirrors, `${slug}.git`)];
    const found = candidates.find((c) => existsSync(c));
    if (!found) throw new Error(`no mirror of ${repo} in ${mirrors} (looked for ${candidates.join(', ')})`);
    if (!existsSync(path.join(dir, `${slug}.git`))) symlinkSync(found, path.join(dir, `${slug}.git`));
  }
  return dir;
}

function duBytes(dir: string): number {
  if (!existsSync(dir)) return 0;
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += statSync(path.join(entry.parentPath, entry.name)).size;
  }
  return total;
}

const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;
const r3 = (x: number) => Math.round(x * 1000) / 1000;
const load = () => loadavg().map((x) => Math.round(x * 100) / 100);

function byCommit(instances: readonly Instance[]): Map<string, Instance[]> {
  const groups = new Map<string, Instance[]>();
  const sorted = [...instances].sort((a, b) => (a.repo + a.base_commit < b.repo + b.base_commit ? -1 : 1));
  for (const i of sorted) groups.set(`${i.repo}@${i.base_commit}`, [...(groups.get(`${i.repo}@${i.base_commit}`) ?? []), i]);
  return groups;
}

/**
 * CPU seconds of this process's main thread alone (Linux `/proc/self/task/<pid>/stat`, utime + stime), or null
 * elsewhere. With tokenizer threads the process's CPU is spread over threads; on a quiet machine with enough
 * cores the main thread's share is the floor of the wall time.
 */
function mainThreadCpuSeconds(): number | null {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of proc(5), counted from the state (field 3) after the command name.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return null;
  }
}

/** One stage in this process. */
async function runStage(stage: string, instances: Instance[], mirrorDir: string, cacheRoot: string, extra: Record<string, string>) {
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const main0 = mainThreadCpuSeconds();
  const groups = byCommit(instances);
  const totals = { commits: 0, listed: 0, candidates: 0, documents: 0, tokenized: 0, tokenizedBytes: 0, cached: 0, tokenizerThreads: 0 };
  const ms = { list: 0, readAndTokenize: 0, build: 0, query: 0 };
  const predictions = new Map<string, string[]>();
  let repoSlug = '';
  let store: BlobTermStore | null = null;
  let reader: BlobReader | null = null;
  // As the evaluation's BM25 predictor does with its shard: the next commit is listed while this one is indexed.
  const keys = [...groups.keys()];
  let ahead: { key: string; listing: Promise<CommitFiles> } | null = null;
  for (const [position, [key, group]] of [...groups].entries()) {
    const repo = parseRepoName(group[0]!.repo);
    if (repo.slug !== repoSlug) {
      await reader?.close();
      repoSlug = repo.slug;
      store = await BlobTermStore.open(blobTermsDir(cacheRoot, repo.slug));
      reader = new BlobReader(path.join(mirrorDir, `${repo.slug}.git`));
    }
    const commit = key.slice(key.indexOf('@') + 1);
    const listing: Promise<CommitFiles> | undefined = ahead?.key === key ? ahead.listing : undefined;
    const indexing = indexCommit(store!, reader!, commit, listing ? { listing } : {});
    const nextKey = keys[position + 1];
    ahead = null;
    if (nextKey) {
      const nextSlug = parseRepoName(groups.get(nextKey)![0]!.repo).slug;
      const nextListing = listCommitFiles(path.join(mirrorDir, `${nextSlug}.git`), nextKey.slice(nextKey.indexOf('@') + 1));
      nextListing.catch(() => undefined); // thrown where it is used
      ahead = { key: nextKey, listing: nextListing };
    }
    const index = await indexing;
    totals.commits++;
    totals.listed += index.stats.listed;
    totals.candidates += index.stats.candidates;
    totals.documents += index.stats.documents;
    totals.tokenized += index.stats.tokenized;
    totals.tokenizedBytes += index.stats.tokenizedBytes;
    totals.cached += index.stats.cached;
    totals.tokenizerThreads = Math.max(totals.tokenizerThreads, index.stats.tokenizerThreads);
    ms.list += index.stats.ms.list;
    ms.readAndTokenize += index.stats.ms.read;
    ms.build += index.stats.ms.build;
    const q0 = performance.now();
    for (const instance of group)
      predictions.set(
        instance.instance_id,
        retrieveTopK(index, instance.problem_statement, DEFAULT_TOP_K).map((r) => r.path),
      );
    ms.query += performance.now() - q0;
  }
  await reader?.close();
  const line: Record<string, unknown> = {
    bench: 'scale',
    stage,
    instances: instances.length,
    ...totals,
    wallS: r3((performance.now() - started) / 1000),
    // CPU seconds of this process (git cat-file's own time not included): on a loaded machine the steadier figure.
    cpuS: r3((process.cpuUsage(cpu0).user + process.cpuUsage(cpu0).system) / 1e6),
    // Of which the main thread (the rest: tokenizer threads, GC and I/O helper threads).
    mainThreadCpuS: main0 === null ? null : r3(mainThreadCpuSeconds()! - main0),
    ms: Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, Math.round(v)])),
    peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
    cacheDiskMb: mb(duBytes(cacheRoot)),
    load: load(),
    ...extra,
  };
  if (stage !== 'new-commit') {
    const scores = instances.map((i) => fileScores(predictions.get(i.instance_id)!, goldFilesFromPatch(i.patch)));
    const ci = (values: number[]) => {
      const c = bootstrapCI(values);
      return { mean: r3(mean(values)), low: r3(c.low), high: r3(c.high) };
    };
    line.top2 = {
      precision: ci(scores.map((s) => s.precision)),
      recall: ci(scores.map((s) => s.recall)),
      fBeta: ci(scores.map((s) => s.f)),
    };
  }
  console.log(JSON.stringify(line));
}

/** Distinct candidate blobs of `commits` (from the tree listings alone, no cache). */
async function candidateBlobs(mirrorDir: string, commits: { repo: string; commit: string }[]): Promise<Map<string, Set<string>>> {
  const byRepo = new Map<string, Set<string>>();
  for (const { repo, commit } of commits) {
    const slug = parseRepoName(repo).slug;
    const listing = await listCommitFiles(path.join(mirrorDir, `${slug}.git`), commit);
    const blobs = byRepo.get(slug) ?? new Set<string>();
    for (const f of listing.files) blobs.add(f.blob);
    byRepo.set(slug, blobs);
  }
  return byRepo;
}

async function denseRate(instances: Instance[], mirrorDir: string, modelDir: string, blobs: number, sizes: Record<string, number>) {
  const { loadEmbeddingModel, releaseEmbeddingModel } = await import('../lib/retrievers/dense');
  const { chunkSettings, embedFileChunks } = await import('../lib/retrievers/dense/dense-index');
  const { readBlobs } = await import('../lib/worktrees/cat-file');
  const model = await loadEmbeddingModel(modelDir);
  const settings = chunkSettings(model, {});
  const first = instances[0]!;
  const slug = parseRepoName(first.repo).slug;
  const gitDir = path.join(mirrorDir, `${slug}.git`);
  const listing = await listCommitFiles(gitDir, first.base_commit);
  const sample = listing.files.slice(0, blobs).map((f) => f.blob);
  const reader = new BlobReader(gitDir);
  const texts: string[] = [];
  await readBlobs(reader, sample, (_oid, content) => void texts.push(content!.toString('utf8')));
  await reader.close();
  const started = performance.now();
  let chunks = 0;
  // Groups of 8 blobs until the sample or the time budget (120 s) is used up: a CPU embeds slowly.
  let embedded = 0;
  let tokens = 0;
  while (embedded < texts.length && performance.now() - started < 120_000) {
    const group = await embedFileChunks(model, texts.slice(embedded, embedded + 8), settings);
    chunks += group.chunks.flat().length;
    tokens += group.tokens;
    embedded += Math.min(8, texts.length - embedded);
  }
  const seconds = (performance.now() - started) / 1000;
  await releaseEmbeddingModel(model);
  const blobsPerSecond = embedded / seconds;
  console.log(
    JSON.stringify({
      bench: 'scale',
      stage: 'dense-rate',
      model: path.basename(modelDir),
      repo: first.repo,
      blobs: embedded,
      chunks,
      tokens,
      tokensPerSecond: r3(tokens / seconds),
      wallS: r3(seconds),
      blobsPerSecond: r3(blobsPerSecond),
      chunksPerSecond: r3(chunks / seconds),
      // Whole-repository dense on this CPU: every distinct blob of each size's commits, embedded once.
      estimatedHoursBySize: Object.fromEntries(
        Object.entries(sizes).map(([size, distinct]) => [size, r3(distinct / blobsPerSecond / 3600)]),
      ),
      peakRssMb: mb(process.resourceUsage().maxRSS * 1024),
      load: load(),
    }),
  );
}

async function child(args: ReturnType<typeof parseArgs>): Promise<void> {
  const all = loadInstances(args.instances);
  const mirrorDir = path.join(args.work, 'mirrors');
  const instances = all.slice(0, args.size);
  const cacheRoot = path.join(args.work, `size-${args.size}`, 'bm25-terms');
  if (args.child === 'bm25-cold' || args.child === 'bm25-warm') {
    await runStage(args.child, instances, mirrorDir, cacheRoot, {});
  } else if (args.child === 'new-commit') {
    // One commit outside the set: the nearest ancestor of the set's last commit that is no base commit and
    // holds Python files the set never had (so the run has new blobs to tokenize).
    const bases = new Set(all.map((i) => i.base_commit));
    const last = instances[instances.length - 1]!;
    const slug = parseRepoName(last.repo).slug;
    const gitDir = path.join(mirrorDir, `${slug}.git`);
    const seen = (
      await candidateBlobs(
        mirrorDir,
        instances.filter((i) => i.repo === last.repo).map((i) => ({ repo: i.repo, commit: i.base_commit })),
      )
    ).get(slug)!;
    let extra: { repo: string; commit: string } | null = null;
    let expected = 0;
    let mine = new Set<string>();
    for (let back = 1; back <= 50 && extra === null; back++) {
      const commit = (await git(['-C', gitDir, 'rev-parse', `${last.base_commit}~${back}`], { timeoutMs: 60_000 })).trim();
      if (bases.has(commit)) continue;
      mine = (await candidateBlobs(mirrorDir, [{ repo: last.repo, commit }])).get(slug)!;
      expected = [...mine].filter((b) => !seen.has(b)).length;
      if (expected > 0) extra = { repo: last.repo, commit };
    }
    if (!extra) throw new Error(`no ancestor of ${last.base_commit} within 50 commits has new Python blobs`);
    const newInstance: Instance = {
      ...instances.find((i) => i.repo === extra.repo)!,
      instance_id: 'new-commit',
      base_commit: extra.commit,
    };
    await runStage('new-commit', [newInstance], mirrorDir, cacheRoot, {
      repo: extra.repo,
      commit: extra.commit,
      expectedNewBlobs: String(expected),
      distinctCandidateBlobs: String(mine.size),
    });
  } else if (args.child === 'dense-rate') {
    const distinct: Record<string, number> = {};
    for (const size of args.sizes) {
      const sets = await candidateBlobs(
        mirrorDir,
        [...byCommit(all.slice(0, size)).values()].map((g) => ({ repo: g[0]!.repo, commit: g[0]!.base_commit })),
      );
      distinct[String(size)] = [...sets.values()].reduce((n, s) => n + s.size, 0);
    }
    await denseRate(instances, mirrorDir, args.model, args.denseBlobs, distinct);
  } else throw new Error(`unknown stage ${args.child}`);
}

function runChild(stage: string, size: number, args: Args, work: string): Promise<number> {
  const argv = ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', stage, '--size', String(size), '--work', work];
  argv.push(
    '--instances',
    args.instances,
    '--model',
    args.model,
    '--sizes',
    args.sizes.join(','),
    '--dense-blobs',
    String(args.denseBlobs),
  );
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, argv, { stdio: 'inherit' });
    proc.once('exit', (code) => resolve(code ?? 1));
  });
}

const args = parseArgs(process.argv.slice(2));
if (args.child) {
  await child(args);
} else {
  const all = loadInstances(args.instances);
  const work = args.out ?? mkdtempSync(path.join(tmpdir(), 'bench-scale-'));
  linkMirrors(args.mirrors, work);
  console.error(`scale: ${all.length} instances of ${REPOS.length} repositories; sizes ${args.sizes.join(', ')}; work dir ${work}`);
  let failures = 0;
  const sizes = args.sizes.filter((s) => s <= all.length);
  for (const size of sizes) {
    for (const stage of ['bm25-cold', 'bm25-warm']) if ((await runChild(stage, size, args, work)) !== 0) failures++;
  }
  const largest = Math.max(...sizes);
  if ((await runChild('new-commit', largest, args, work)) !== 0) failures++;
  if (args.denseBlobs > 0 && existsSync(path.join(args.model, 'model.onnx'))) {
    if ((await runChild('dense-rate', Math.min(...sizes), args, work)) !== 0) failures++;
  } else console.error(`scale: dense-rate skipped (no model at ${args.model} or --dense-blobs 0)`);
  if (args.out === null) rmSync(work, { recursive: true, force: true });
  process.exit(failures > 0 ? 1 : 0);
}
