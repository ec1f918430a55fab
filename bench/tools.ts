/**
 * The sandbox tools (lib/sandbox: grep, glob, read) against raw subprocess calls on the same queries, in one
 * run, at concurrency 1 and 64.
 *
 *   npx tsx bench/tools.ts [--root DIR] [--rounds N] [--calls64 N]
 *
 * Tree: DIR (e.g. a checkout of a SWE-bench repository), default a copy of node_modules/typescript in a temp
 * directory. References, spawned from Node the same way (spawn, argument array, stdout read to the end):
 * - grep: `rg` with exactly the arguments our tool passes ("rg-same-args": the ratio is our wrapper's
 *   overhead: path guard, semaphore, parsing, sorting, formatting) and plain `rg -n PATTERN` ("rg-default":
 *   multi-threaded, unsorted, respects .gitignore);
 * - glob: `rg --files` with our arguments;
 * - read: `sed -n 'A,Bp' FILE` (our read streams a `cat` in the tool sandbox).
 * Our tools run in the bubblewrap sandbox (the default isolation); the references do not, so the ratios
 * include its cost (bench/isolation.ts measures it alone).
 * Ours and the reference alternate call by call (c=1) or batch by batch (c=64), so machine load hits both.
 * At c=64 all 64 calls of a batch are issued in the same tick and each latency runs from that moment (as
 * when a rollout issues its tool calls), so both sides pay for queueing behind each other's spawns.
 * Prints one JSON line per (tool, concurrency, reference) with p50/p95 in ms and the ratio ours/reference;
 * at c=64 also the mean wall time of a 64-call batch. Our grep stops reading after 1000 matches and our glob
 * only decodes the head of the listing, while the references read everything: on match-heavy queries that
 * is part of our advantage, by design.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { quantile } from '../lib/metrics/summary';
import { findExecutable, sandboxEnv } from '../lib/sandbox/executables';
import { glob } from '../lib/sandbox/glob';
import { grep, RIPGREP_OUTPUT_ARGS } from '../lib/sandbox/grep';
import { read } from '../lib/sandbox/read';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

interface Args {
  root: string | null;
  rounds: number;
  calls64: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { root: null, rounds: 5, calls64: 256 };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--root') args.root = path.resolve(value);
    else if (flag === '--rounds') args.rounds = Number(value);
    else if (flag === '--calls64') args.calls64 = Number(value);
    else throw new Error(`unknown argument ${flag} (expected --root, --rounds, --calls64)`);
  }
  if (!Number.isInteger(args.rounds) || args.rounds < 1) throw new Error('--rounds must be a positive integer');
  if (!Number.isInteger(args.calls64) || args.calls64 < 64) throw new Error('--calls64 must be an integer ≥ 64');
  return args;
}

/** The q-quantile of unsorted values (lib/metrics' quantile: linear interpolation, numpy's default). */
function percentile(values: number[], q: number): number {
  return quantile(
    [...values].sort((a, b) => a - b),
    q,
  );
}

/** One raw subprocess, read to the end. */
function rawCall(executable: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    // The sandbox's spawn options (detached: its own process group and session), so on a shared machine
    // the scheduler treats both sides alike (Linux autogroups favour separate sessions).
    const child = spawn(executable, args, { cwd, env: sandboxEnv(), detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.on('error', reject);
    child.on('close', () => resolve());
  });
}

async function timed(job: Job): Promise<number> {
  const started = performance.now();
  await job();
  return performance.now() - started;
}

/** Issues all jobs in the same tick; each latency runs from that moment to the job's end. */
async function batch(jobs: Job[]): Promise<{ latencies: number[]; wallMs: number }> {
  const started = performance.now();
  const latencies = await Promise.all(jobs.map((job) => job().then(() => performance.now() - started)));
  return { latencies, wallMs: performance.now() - started };
}

type Job = () => Promise<unknown>;

interface Pair {
  tool: 'grep' | 'glob' | 'read';
  reference: string;
  ours: Job[];
  raw: Job[];
}

function report(
  pair: Pair,
  concurrency: number,
  ours: number[],
  raw: number[],
  root: string,
  batches?: { ours: number[]; raw: number[] },
): void {
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const line = {
    bench: 'tools',
    tool: pair.tool,
    reference: pair.reference,
    concurrency,
    calls: ours.length,
    ours_p50_ms: +percentile(ours, 0.5).toFixed(2),
    ours_p95_ms: +percentile(ours, 0.95).toFixed(2),
    ref_p50_ms: +percentile(raw, 0.5).toFixed(2),
    ref_p95_ms: +percentile(raw, 0.95).toFixed(2),
    ratio_p50: +(percentile(ours, 0.5) / percentile(raw, 0.5)).toFixed(3),
    ratio_p95: +(percentile(ours, 0.95) / percentile(raw, 0.95)).toFixed(3),
    // c=64: wall time of a batch of 64 calls (a turn waits for its slowest call), the throughput view.
    ...(batches
      ? {
          ours_batch_ms: +mean(batches.ours).toFixed(1),
          ref_batch_ms: +mean(batches.raw).toFixed(1),
          ratio_batch: +(mean(batches.ours) / mean(batches.raw)).toFixed(3),
        }
      : {}),
    root,
  };
  console.log(JSON.stringify(line));
}

async function listFiles(root: string): Promise<string[]> {
  const rg = findExecutable('rg')!;
  return new Promise((resolve, reject) => {
    let out = '';
    const child = spawn(rg, ['--no-config', '--files', '--sort=path', '--type-add', 'src:*.{py,ts,js,rs,go,java,c,h}', '-tsrc'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.on('error', reject);
    child.on('close', () => resolve(out.split('\n').filter(Boolean)));
  });
}

export async function runToolsBench(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const rg = findExecutable('rg');
  const sed = findExecutable('sed');
  if (!rg || !sed) throw new Error('bench/tools needs rg and sed on PATH');
  let root = args.root;
  let cleanup = () => {};
  if (!root) {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'codegrep-bench-tools-'));
    root = path.join(tmp, 'typescript');
    cpSync(path.join(REPO_ROOT, 'node_modules/typescript'), root, { recursive: true });
    cleanup = () => rmSync(tmp, { recursive: true, force: true });
  }
  try {
    const files = await listFiles(root);
    if (files.length === 0) throw new Error(`no source files under ${root}`);
    const patterns = [
      'TODO',
      'import ',
      'class \\w+Error',
      'def \\w+_node',
      'function \\w+\\(',
      'return null',
      'raise ValueError',
      'config',
    ];
    const globs = ['**/*.py', '**/*.js', '**/test_*', '*.json', '**/*.d.ts'];
    const readFiles = Array.from({ length: 8 }, (_, k) => files[Math.floor((k * files.length) / 8)]!);
    console.log(
      JSON.stringify({
        bench: 'tools',
        root,
        source_files: files.length,
        patterns,
        globs,
        readFiles,
        rounds: args.rounds,
        calls64: args.calls64,
      }),
    );

    const grepArgs = (p: string) => [...RIPGREP_OUTPUT_ARGS, '--iglob=!.git', '-e', p, '--'];
    const pairs: Pair[] = [
      {
        tool: 'grep',
        reference: 'rg-same-args',
        ours: patterns.map((p) => () => grep(root!, { pattern: p }, { engine: 'rg' })),
        raw: patterns.map((p) => () => rawCall(rg, grepArgs(p), root!)),
      },
      {
        tool: 'grep',
        reference: 'rg-default',
        ours: patterns.map((p) => () => grep(root!, { pattern: p }, { engine: 'rg' })),
        raw: patterns.map((p) => () => rawCall(rg, ['-n', p], root!)),
      },
      {
        tool: 'glob',
        reference: 'rg-files-same-args',
        ours: globs.map((g) => () => glob(root!, { pattern: g }, { engine: 'rg' })),
        raw: globs.map(
          (g) => () =>
            rawCall(
              rg,
              ['--no-config', '--files', '--null', '--hidden', '--no-ignore', '--sort=path', `--glob=${g}`, '--iglob=!.git'],
              root!,
            ),
        ),
      },
      {
        tool: 'read',
        reference: 'sed-n',
        ours: readFiles.map((f) => () => read(root!, { path: f, start_line: 1, end_line: 200 })),
        raw: readFiles.map((f) => () => rawCall(sed, ['-n', '1,200p', '--', f], root!)),
      },
    ];

    // Warm the page cache and the code paths once.
    for (const pair of pairs) {
      for (let k = 0; k < pair.ours.length; k++) {
        await pair.ours[k]!();
        await pair.raw[k]!();
      }
    }

    for (const pair of pairs) {
      const ours: number[] = [];
      const raw: number[] = [];
      for (let round = 0; round < args.rounds; round++) {
        for (let k = 0; k < pair.ours.length; k++) {
          // Alternate which side goes first so neither always gets the warmer cache.
          if ((round + k) % 2 === 0) {
            ours.push(await timed(pair.ours[k]!));
            raw.push(await timed(pair.raw[k]!));
          } else {
            raw.push(await timed(pair.raw[k]!));
            ours.push(await timed(pair.ours[k]!));
          }
        }
      }
      report(pair, 1, ours, raw, root);
    }

    for (const pair of pairs) {
      const ours: number[] = [];
      const raw: number[] = [];
      const sixtyFour = (jobs: Job[]) => Array.from({ length: 64 }, (_, k) => jobs[k % jobs.length]!);
      const batches = { ours: [] as number[], raw: [] as number[] };
      for (let done = 0; done < args.calls64; done += 64) {
        const mine = await batch(sixtyFour(pair.ours));
        ours.push(...mine.latencies);
        batches.ours.push(mine.wallMs);
        const theirs = await batch(sixtyFour(pair.raw));
        raw.push(...theirs.latencies);
        batches.raw.push(theirs.wallMs);
      }
      report(pair, 64, ours, raw, root, batches);
    }
  } finally {
    cleanup();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  runToolsBench(process.argv.slice(2)).catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
