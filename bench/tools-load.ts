/**
 * The agent tools under load: many concurrent mixed calls through `runTool` over a large synthetic tree, in
 * several configurations in the same invocation: the processes spawned by the worker itself (Node's `spawn`,
 * whose fork/exec runs on the event loop) or by the spawner helper (lib/sandbox/spawner), with glob's listing
 * cache (lib/sandbox/glob-cache.ts) off or on. `in-process:off` is the code before both: the reference.
 *
 *   npm run bench -- tools-load            (120,000 files, 200 calls, the three configurations below)
 *   npx tsx bench/tools-load.ts [--files N] [--calls N] [--aborts N] [--configs in-process:off,helper:off,helper:on]
 *
 * Tree: /tmp/codegrep-bench-tools-load-<N>/tree, built once and reused (a `.complete` marker is written last):
 * N/1000 package directories of 10 modules × 100 files (.py .ts .md .json .txt), a few lines each.
 * Mix "glob40-grep40-read20": call k is a glob when k mod 5 ∈ {0,1} (whole-tree patterns, from narrow ones to
 * "**\/*.py", which lists 40 % of the tree), a grep scoped to one package (1,000 files) when k mod 5 ∈ {2,3},
 * and a read of one file's first 200 lines otherwise. All calls are issued in the same tick, with the tools'
 * default timeouts (10 s grep/glob, 5 s read); each answer time runs from that tick. Alongside them, `--aborts`
 * extra whole-tree globs are issued and aborted 500 ms later (the abort timer's intended moment, so loop lag
 * counts against us): abort latency is the time from that moment to the cancelled answer.
 *
 * Prints one JSON line per configuration: timeouts (answers saying "timed out"), other errors, p50/p99/max answer
 * time, max event-loop delay (perf_hooks.monitorEventLoopDelay, 10 ms resolution) over the run and, as the
 * floor the machine's scheduling sets, over 3 s of an idle loop just before it, abort latency
 * p50/max, and how long after the last answer the subprocess permits were all back (every process exited).
 */
import { mkdirSync, existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { quantile } from '../lib/metrics/summary';
import { globListingCache } from '../lib/sandbox/glob-cache';
import { runTool } from '../lib/sandbox/run-tool';
import { subprocessSlots } from '../lib/sandbox/semaphore';
import { selectSpawnPath, spawnerAvailable, type SpawnPath } from '../lib/sandbox/spawner';
import type { ToolResult } from '../schemas/tools';

/** A spawn path and whether glob's listing cache is on: `in-process:off` is the code before this work. */
interface Config {
  spawnPath: SpawnPath;
  globCache: boolean;
}

interface Args {
  files: number;
  calls: number;
  aborts: number;
  configs: Config[];
}

function parseConfig(text: string): Config {
  const [spawnPath, cache] = text.split(':');
  if ((spawnPath !== 'in-process' && spawnPath !== 'helper') || (cache !== 'on' && cache !== 'off')) {
    throw new Error(`--configs: ${JSON.stringify(text)} is not PATH:CACHE with PATH in-process|helper and CACHE on|off`);
  }
  return { spawnPath, globCache: cache === 'on' };
}

function parseArgs(argv: string[]): Args {
  const args: Args = { files: 120_000, calls: 200, aborts: 20, configs: ['in-process:off', 'helper:off', 'helper:on'].map(parseConfig) };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--files') args.files = Number(value);
    else if (flag === '--calls') args.calls = Number(value);
    else if (flag === '--aborts') args.aborts = Number(value);
    else if (flag === '--configs') args.configs = value.split(',').map(parseConfig);
    else throw new Error(`unknown argument ${flag} (expected --files, --calls, --aborts, --configs)`);
  }
  if (!Number.isInteger(args.files) || args.files < 1000 || args.files % 1000 !== 0) {
    throw new Error(`--files must be a positive multiple of 1000, got ${args.files}`);
  }
  if (!Number.isInteger(args.calls) || args.calls < 5) throw new Error(`--calls must be an integer ≥ 5, got ${args.calls}`);
  if (!Number.isInteger(args.aborts) || args.aborts < 0) throw new Error(`--aborts must be an integer ≥ 0, got ${args.aborts}`);
  return args;
}

const FILES_PER_MODULE = 100;
const MODULES_PER_PACKAGE = 10;
const EXTENSIONS = ['py', 'py', 'ts', 'md', 'json', 'txt'];

function packageName(p: number): string {
  return `pkg${String(p).padStart(3, '0')}`;
}

function fileName(p: number, m: number, f: number): string {
  const ext = EXTENSIONS[f % EXTENSIONS.length]!;
  const stem = f % 10 === 3 ? `test_${f}` : f % 17 === 0 ? `config_${f}` : `file_${f}`;
  return `${packageName(p)}/mod${m}/${stem}.${ext}`;
}

/** The synthetic tree, built once per size and reused across runs. */
function ensureTree(files: number): string {
  const base = path.join(os.tmpdir(), `codegrep-bench-tools-load-${files}`);
  const root = path.join(base, 'tree');
  const marker = path.join(base, '.complete');
  if (existsSync(marker)) return root;
  const started = performance.now();
  const packages = files / (MODULES_PER_PACKAGE * FILES_PER_MODULE);
  for (let p = 0; p < packages; p++) {
    for (let m = 0; m < MODULES_PER_PACKAGE; m++) {
      mkdirSync(path.join(root, packageName(p), `mod${m}`), { recursive: true });
      for (let f = 0; f < FILES_PER_MODULE; f++) {
        const lines = [
          `# ${packageName(p)}.mod${m} file ${f}`,
          `def handler_${f}(request, config):`,
          f % 7 === 0 ? '    # TODO: validate the request first' : '    pass',
          `    return config.get("key_${(p * 31 + m * 7 + f) % 1000}")`,
          '',
        ];
        writeFileSync(path.join(root, fileName(p, m, f)), lines.join('\n'));
      }
    }
  }
  writeFileSync(marker, `${files}\n`);
  console.error(`built ${files} files under ${root} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return root;
}

const GLOBS = ['**/*.md', `${packageName(3)}/**/test_*.py`, '**/config_*.json', '**/mod7/*_9*.ts', '*.txt', '**/*.py'];
const GREP_PATTERNS = ['TODO', 'def handler_4\\d\\b', 'key_77\\b', 'return config', 'request, config'];

/** How long the idle loop is watched before each run (the lag floor on this machine now). */
const IDLE_BASELINE_MS = 3_000;

/** When the extra globs are aborted: they are queued behind the load then, or running. */
const ABORT_AFTER_MS = 500;

type Call = { tool: 'glob' | 'grep' | 'read'; args: Record<string, unknown> };

function mixedCall(k: number, packages: number): Call {
  const slot = k % 5;
  if (slot <= 1) return { tool: 'glob', args: { pattern: GLOBS[Math.floor(k / 5 + slot) % GLOBS.length]! } };
  if (slot <= 3) {
    return {
      tool: 'grep',
      args: { pattern: GREP_PATTERNS[Math.floor(k / 5) % GREP_PATTERNS.length]!, path: packageName((k * 7) % packages) },
    };
  }
  const p = (k * 13) % packages;
  return { tool: 'read', args: { path: fileName(p, k % MODULES_PER_PACKAGE, k % FILES_PER_MODULE), start_line: 1, end_line: 200 } };
}

function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  return quantile(
    [...values].sort((a, b) => a - b),
    q,
  );
}

const round = (x: number) => (Number.isFinite(x) ? +x.toFixed(1) : null);

async function permitsBack(): Promise<number> {
  const started = performance.now();
  while (subprocessSlots.inUse > 0) {
    if (performance.now() - started > 60_000) return Infinity;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - started;
}

async function runLoad(root: string, args: Args, { spawnPath, globCache }: Config): Promise<void> {
  selectSpawnPath(spawnPath);
  globListingCache.enabled = globCache;
  // Each run starts cold: no listing is remembered from the previous spawn path's run.
  globListingCache.clear();
  const statsBefore = { ...globListingCache.stats };
  const packages = args.files / (MODULES_PER_PACKAGE * FILES_PER_MODULE);
  // Warm the page cache and the code paths (the helper's start included) outside the measurement.
  for (let k = 0; k < 5; k++) {
    const call = mixedCall(k, packages);
    await runTool(root, call.tool, call.args);
  }
  await permitsBack();

  // The floor: the same monitor over an idle loop, so what the machine's own scheduling adds is visible.
  const idle = monitorEventLoopDelay({ resolution: 10 });
  idle.enable();
  await new Promise((resolve) => setTimeout(resolve, IDLE_BASELINE_MS));
  idle.disable();

  const lag = monitorEventLoopDelay({ resolution: 10 });
  lag.enable();
  const started = performance.now();
  const answers: Array<Promise<{ call: Call; result: ToolResult; ms: number }>> = [];
  for (let k = 0; k < args.calls; k++) {
    const call = mixedCall(k, packages);
    answers.push(runTool(root, call.tool, call.args).then((result) => ({ call, result, ms: performance.now() - started })));
  }
  const abortAt = started + ABORT_AFTER_MS;
  const aborted: Array<Promise<{ result: ToolResult; latencyMs: number }>> = [];
  const controllers: AbortController[] = [];
  for (let k = 0; k < args.aborts; k++) {
    const controller = new AbortController();
    controllers.push(controller);
    aborted.push(
      runTool(root, 'glob', { pattern: '**/*.py' }, { signal: controller.signal }).then((result) => ({
        result,
        latencyMs: performance.now() - abortAt,
      })),
    );
  }
  setTimeout(() => controllers.forEach((c) => c.abort()), ABORT_AFTER_MS);

  const results = await Promise.all(answers);
  const abortResults = await Promise.all(aborted);
  const answeredMs = performance.now() - started;
  const releasedAfterMs = await permitsBack();
  lag.disable();

  const times = results.map((r) => r.ms);
  const timeouts = results.filter((r) => r.result.status === 'error' && /timed out/.test(r.result.message ?? ''));
  const otherErrors = results.filter((r) => r.result.status === 'error' && !/timed out/.test(r.result.message ?? ''));
  const byTool = (tool: Call['tool']) => results.filter((r) => r.call.tool === tool).map((r) => r.ms);
  const cancelled = abortResults.filter((r) => r.result.status === 'error' && /cancelled/.test(r.result.message ?? ''));
  const abortLatencies = cancelled.map((r) => r.latencyMs);
  console.log(
    JSON.stringify({
      bench: 'tools-load',
      spawn_path: spawnPath,
      glob_cache_on: globCache,
      files: args.files,
      calls: args.calls,
      mix: 'glob40-grep40-read20',
      timeouts: timeouts.length,
      timeout_tools: [...new Set(timeouts.map((r) => r.call.tool))],
      other_errors: otherErrors.length,
      first_other_error: otherErrors[0]?.result.message ?? null,
      p50_ms: round(percentile(times, 0.5)),
      p99_ms: round(percentile(times, 0.99)),
      max_ms: round(Math.max(...times)),
      glob_p50_ms: round(percentile(byTool('glob'), 0.5)),
      grep_p50_ms: round(percentile(byTool('grep'), 0.5)),
      read_p50_ms: round(percentile(byTool('read'), 0.5)),
      all_answered_ms: round(answeredMs),
      loop_lag_max_ms: round(lag.max / 1e6),
      loop_lag_p99_ms: round(lag.percentile(99) / 1e6),
      idle_loop_lag_max_ms: round(idle.max / 1e6),
      idle_loop_lag_p99_ms: round(idle.percentile(99) / 1e6),
      aborts: args.aborts,
      aborts_cancelled: cancelled.length,
      abort_p50_ms: round(percentile(abortLatencies, 0.5)),
      abort_max_ms: round(abortLatencies.length ? Math.max(...abortLatencies) : NaN),
      permits_back_after_ms: round(releasedAfterMs),
      glob_cache: Object.fromEntries(
        Object.entries(globListingCache.stats).map(([k, v]) => [k, v - statsBefore[k as keyof typeof statsBefore]]),
      ),
      load_average_1m: +os.loadavg()[0]!.toFixed(2),
    }),
  );
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const root = ensureTree(args.files);
  for (const config of args.configs) {
    if (config.spawnPath === 'helper' && !spawnerAvailable()) {
      console.log(
        JSON.stringify({ bench: 'tools-load', spawn_path: config.spawnPath, error: 'python3 is not installed: no spawner helper' }),
      );
      continue;
    }
    await runLoad(root, args, config);
  }
  process.exit(0);
}

main().catch((error) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
