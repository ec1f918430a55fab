/**
 * `npm run bench -- sandbox-lag`: the longest event-loop block (perf_hooks.monitorEventLoopDelay, 5 ms
 * resolution) and the wall time of the sandbox's hostile in-process cases (lib/sandbox/README.md, "No
 * in-process stall"): a blank-line flood through `ls | grep -v .`, glob words and glob patterns over a
 * directory of 2,000 names of 250 characters on both engines, and 64 concurrent floods. One JSON line per
 * case; the sandbox promises every in-process step yields within 50 ms.
 */
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { runTool } from '../lib/sandbox/run-tool';

const blankLines = Number(process.env.BENCH_BLANK_LINES ?? 60_000);
const longNames = Number(process.env.BENCH_LONG_NAMES ?? 2000);

async function measure(name: string, fn: () => Promise<unknown>): Promise<void> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  const started = performance.now();
  await fn();
  const wallMs = performance.now() - started;
  await new Promise((r) => setImmediate(r));
  histogram.disable();
  const lagMaxMs = histogram.count > 0 ? histogram.max / 1e6 : wallMs;
  console.log(
    JSON.stringify({
      bench: 'sandbox-lag',
      case: name,
      lagMaxMs: Math.round(lagMaxMs),
      wallMs: Math.round(wallMs),
      withinBudget: lagMaxMs < 50,
    }),
  );
}

const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-lag-')));
try {
  await fs.mkdir(path.join(root, 'flood'));
  await fs.writeFile(path.join(root, 'flood', 'blank.txt'), '\n'.repeat(blankLines));
  await fs.mkdir(path.join(root, 'long'));
  for (let k = 0; k < longNames; k++) {
    const name = `${'abcdefghijklmnopqrstuvwxyz_'.repeat(10).slice(k % 27, (k % 27) + 240)}_${k}`;
    await fs.writeFile(path.join(root, 'long', name), '');
  }
  const expensive = `${'[a-z]*'.repeat(60)}Q`;
  // What the machine itself adds: the same histogram over an idle half second (a loaded machine
  // deschedules the process, which reads as lag too).
  await measure('baseline: idle 500 ms', () => new Promise((r) => setTimeout(r, 500)));
  await measure(`ls | grep -h -r -v -e . flood (${blankLines} blank lines)`, () =>
    runTool(root, 'terminal', { command: 'ls | grep -h -r -v -e . flood' }),
  );
  await measure(`terminal ls long/<60 x [a-z]*>Q over ${longNames} names`, () =>
    runTool(root, 'terminal', { command: `ls long/${expensive}` }),
  );
  for (const engine of ['rg', 'grep'] as const) {
    await measure(`glob long/<60 x [a-z]*>Q [${engine}]`, () => runTool(root, 'glob', { pattern: `long/${expensive}` }, { engine }));
    await measure(`glob long/* [${engine}]`, () => runTool(root, 'glob', { pattern: 'long/*' }, { engine }));
  }
  // The same 128 spawns with no output to process: what the spawning itself costs the loop.
  await measure('64 concurrent `ls flood | wc -l` (spawn cost only)', () =>
    Promise.all(Array.from({ length: 64 }, () => runTool(root, 'terminal', { command: 'ls flood | wc -l' }))),
  );
  await measure('64 concurrent blank-line floods', () =>
    Promise.all(Array.from({ length: 64 }, () => runTool(root, 'terminal', { command: 'ls | grep -h -r -v -e . flood' }))),
  );
} finally {
  await fs.rm(root, { recursive: true, force: true });
}
