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
 * - read: `sed -n 'A,Bp' FILE` (our read is in-process, no subprocess).
 * Ours and the reference alternate call by call (c=1) or batch by batch (c=64), so machine load hits both.
 * Prints one JSON line per (tool, concurrency, reference) with p50/p95 in ms and the ratio ours/reference.
 */
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { findExecutable, sandboxEnv } from '../lib/sandbox/executables';
import { glob } from '../lib/sandbox/glob';
import { grep } from '../lib/sandbox/grep';
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

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lo = Math.floor(position);
  const hi = Math.ceil(position);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (position - lo);
}

/** One raw subprocess, read to the end, timed from spawn to close. */
function rawCall(executable: string, args: string[], cwd: string): Promise<number> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(executable, args, { cwd, env: sandboxEnv(), stdio: ['ignore', 'pipe', 'ignore'] });
    child.stdout.on('data', () => {});
    child.on('error', reject);
    child.on('close', () => resolve(performance.now() - started));
  });
}

async function timed(call: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await call();
  return performance.now() - started;
}

type Job = () => Promise<number>;

interface Pair {
  tool: 'grep' | 'glob' | 'read';
  reference: string;
  ours: Job[];
  raw: Job[];
}

/** Runs `jobs` with at most `limit` in flight; returns each job's latency. */
async function pool(jobs: Job[], limit: number): Promise<number[]> {
  const latencies: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const job = jobs[next++]!;
      latencies.push(await job());
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, jobs.length) }, worker));
  return latencies;
}

function report(pair: Pair, concurrency: number, ours: number[], raw: number[], root: string): void {
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
    const patterns = ['TODO', 'import ', 'class \\w+Error', 'def \\w+_node', 'function \\w+\\(', 'return null', 'raise ValueError', 'config'];
    const globs = ['**/*.py', '**/*.js', '**/test_*', '*.json', '**/*.d.ts'];
    const readFiles = Array.from({ length: 8 }, (_, k) => files[Math.floor((k * files.length) / 8)]!);
    console.log(JSON.stringify({ bench: 'tools', root, source_files: files.length, patterns, globs, readFiles, rounds: args.rounds, calls64: args.calls64 }));

    const grepArgs = (p: string) => ['--no-config', '--color=never', '--no-heading', '--with-filename', '--line-number', '--null',
      '--hidden', '--no-ignore', '--sort=path', '--glob=!.git', '-e', p, '--'];
    const pairs: Pair[] = [
      {
        tool: 'grep',
        reference: 'rg-same-args',
        ours: patterns.map((p) => () => timed(() => grep(root!, { pattern: p }, { engine: 'rg' }))),
        raw: patterns.map((p) => () => rawCall(rg, grepArgs(p), root!)),
      },
      {
        tool: 'grep',
        reference: 'rg-default',
        ours: patterns.map((p) => () => timed(() => grep(root!, { pattern: p }, { engine: 'rg' }))),
        raw: patterns.map((p) => () => rawCall(rg, ['-n', p], root!)),
      },
      {
        tool: 'glob',
        reference: 'rg-files-same-args',
        ours: globs.map((g) => () => timed(() => glob(root!, { pattern: g }, { engine: 'rg' }))),
        raw: globs.map((g) => () => rawCall(rg, ['--no-config', '--files', '--null', '--hidden', '--no-ignore', '--sort=path', `--glob=${g}`, '--glob=!.git'], root!)),
      },
      {
        tool: 'read',
        reference: 'sed-n',
        ours: readFiles.map((f) => () => timed(() => read(root!, { path: f, start_line: 1, end_line: 200 }))),
        raw: readFiles.map((f) => () => rawCall(sed, ['-n', '1,200p', '--', f], root!)),
      },
    ];

    // Warm the page cache and the code paths once.
    for (const pair of pairs) for (let k = 0; k < pair.ours.length; k++) await pair.ours[k]!(), await pair.raw[k]!();

    for (const pair of pairs) {
      const ours: number[] = [];
      const raw: number[] = [];
      for (let round = 0; round < args.rounds; round++) {
        for (let k = 0; k < pair.ours.length; k++) {
          // Alternate which side goes first so neither always gets the warmer cache.
          if ((round + k) % 2 === 0) {
            ours.push(await pair.ours[k]!());
            raw.push(await pair.raw[k]!());
          } else {
            raw.push(await pair.raw[k]!());
            ours.push(await pair.ours[k]!());
          }
        }
      }
      report(pair, 1, ours, raw, root);
    }

    for (const pair of pairs) {
      const ours: number[] = [];
      const raw: number[] = [];
      const batch = (jobs: Job[]) => Array.from({ length: 64 }, (_, k) => jobs[k % jobs.length]!);
      for (let done = 0; done < args.calls64; done += 64) {
        ours.push(...(await pool(batch(pair.ours), 64)));
        raw.push(...(await pool(batch(pair.raw), 64)));
      }
      report(pair, 64, ours, raw, root);
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
