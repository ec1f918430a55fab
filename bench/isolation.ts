/**
 * What the tool sandbox costs per call: the same tool calls with `isolation: 'namespace'` (each process in a
 * bubblewrap namespace; lib/sandbox/namespace.ts) and `'filter-only'` (the programs run on the host), one
 * after another, alternating call by call so machine load hits both sides alike.
 *
 *   npx tsx bench/isolation.ts [--root DIR] [--calls N]
 *
 * Tree: DIR, default a copy of this repository's lib/ in a temp directory (small on purpose: the number is
 * the fixed cost of a call — bwrap's namespaces and mounts — not a search's). Per tool (grep, glob, read, a
 * two-stage terminal pipeline) prints one JSON line with p50/p95 of both sides in ms and the extra p50 per
 * call (namespace − filter-only).
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { quantile } from '../lib/metrics/summary';
import { probeNamespace } from '../lib/sandbox/namespace';
import { runTool } from '../lib/sandbox/run-tool';
import type { SandboxIsolation } from '../schemas/sandbox';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function parseArgs(argv: string[]): { root: string | null; calls: number } {
  const args = { root: null as string | null, calls: 200 };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i];
    const value = argv[i + 1];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    if (flag === '--root') args.root = path.resolve(value);
    else if (flag === '--calls') args.calls = Number(value);
    else throw new Error(`unknown argument ${flag} (expected --root, --calls)`);
  }
  if (!Number.isInteger(args.calls) || args.calls < 2) throw new Error('--calls must be an integer ≥ 2');
  return args;
}

const percentile = (values: number[], q: number) =>
  quantile(
    [...values].sort((a, b) => a - b),
    q,
  );

export async function runIsolationBench(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const probe = await probeNamespace();
  if (!probe.ok) throw new Error(`bench/isolation needs the tool sandbox: ${probe.reason}`);
  let root = args.root;
  let cleanup = () => {};
  if (!root) {
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'codegrep-bench-isolation-'));
    root = path.join(tmp, 'lib');
    cpSync(path.join(REPO_ROOT, 'lib'), root, { recursive: true });
    cleanup = () => rmSync(tmp, { recursive: true, force: true });
  }
  const calls: Array<{ tool: string; name: string; args: Record<string, unknown> }> = [
    { tool: 'grep', name: 'grep', args: { pattern: 'export function \\w+' } },
    { tool: 'glob', name: 'glob', args: { pattern: '**/*.test.ts' } },
    { tool: 'read', name: 'read', args: { path: 'sandbox/subprocess.ts', start_line: 1, end_line: 200 } },
    { tool: 'terminal', name: 'terminal (2 stages)', args: { command: "rg -n 'async function' sandbox | head -20" } },
  ];
  try {
    console.log(JSON.stringify({ bench: 'isolation', root, calls_per_side: args.calls, bwrap: probe.bwrap }));
    for (const call of calls) {
      const run = async (isolation: SandboxIsolation) => {
        const started = performance.now();
        const result = await runTool(root!, call.tool, call.args, { isolation });
        if (result.status === 'error') throw new Error(`${call.name} (${isolation}) failed: ${result.message}`);
        return performance.now() - started;
      };
      await run('namespace');
      await run('filter-only');
      const times: Record<SandboxIsolation, number[]> = { namespace: [], 'filter-only': [] };
      for (let k = 0; k < args.calls; k++) {
        const order: SandboxIsolation[] = k % 2 === 0 ? ['namespace', 'filter-only'] : ['filter-only', 'namespace'];
        for (const isolation of order) times[isolation].push(await run(isolation));
      }
      const p = (isolation: SandboxIsolation, q: number) => +percentile(times[isolation], q).toFixed(2);
      console.log(
        JSON.stringify({
          bench: 'isolation',
          tool: call.name,
          calls: args.calls,
          namespace_p50_ms: p('namespace', 0.5),
          namespace_p95_ms: p('namespace', 0.95),
          filter_only_p50_ms: p('filter-only', 0.5),
          filter_only_p95_ms: p('filter-only', 0.95),
          extra_p50_ms: +(p('namespace', 0.5) - p('filter-only', 0.5)).toFixed(2),
          ratio_p50: +(p('namespace', 0.5) / p('filter-only', 0.5)).toFixed(3),
        }),
      );
    }
  } finally {
    cleanup();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  runIsolationBench(process.argv.slice(2)).catch((error) => {
    console.error(error instanceof Error ? error.message : error);
    process.exit(1);
  });
}
