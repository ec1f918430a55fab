import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../schemas/tools';
import { findExecutable } from '../../lib/sandbox/executables';
import { sandboxMemoryBudgetBytes, SANDBOX_LIMITS } from '../../lib/sandbox/limits';
import { sanitizeText } from '../../lib/sandbox/output';
import { runTool } from '../../lib/sandbox/run-tool';
import { Semaphore, subprocessSlots } from '../../lib/sandbox/semaphore';
import { runPipeline } from '../../lib/sandbox/subprocess';
import { expandGlobWord } from '../../lib/sandbox/terminal-expand';
import { makeSandboxFixture, type SandboxFixture } from '../fixtures/sandbox/fixture';
import { recordAttack } from './attack-log';

/**
 * Bounded in-process work, bounded total resources, and output sanitising: the event loop is never
 * blocked for long by tool output or file names (blank-line floods through `ls | grep`, hostile glob words
 * over a directory of long names, on both engines), thread counts and memory caps cannot be stepped
 * round (`rg -j 0`, concurrent bombs against the worker-wide budget, alternation-width regexes), a
 * timed-out call never claims output it does not have, and no C1, bidi or invisible character reaches
 * the transcript. Lag is measured with a 5 ms event-loop-delay histogram: the budget (200 ms) is a
 * bound on blocking, far above what the fixed code shows and far below what the old code did (seconds).
 */
const LAG_BUDGET_MS = 200;
const LONG_NAMES = 2000;
let fx: SandboxFixture;

/** Deterministic "editor-made" names: 250 characters of lowercase letters and underscores, then a number. */
function longName(k: number): string {
  let x = k + 1;
  let name = '';
  const suffix = `_${k}`;
  while (name.length < 250 - suffix.length) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    name += 'abcdefghijklmnopqrstuvwxyz_'[x % 27];
  }
  return name + suffix;
}

beforeAll(async () => {
  fx = await makeSandboxFixture();
  await fs.mkdir(path.join(fx.root, 'flood'));
  await fs.writeFile(path.join(fx.root, 'flood', 'blank.txt'), '\n'.repeat(20_000));
  await fs.mkdir(path.join(fx.root, 'long'));
  for (let k = 0; k < LONG_NAMES; k += 100) {
    await Promise.all(Array.from({ length: 100 }, (_, j) => fs.writeFile(path.join(fx.root, 'long', longName(k + j)), '')));
  }
  await fs.writeFile(
    path.join(fx.root, 'unsafe.txt'),
    'csi:\u009b31m c1:\u0085\u0080\u009f bidi:\u202eevil\u202c\u2066x\u2069\u061c\u200e\u200f\u202a\u202b\u202d ' +
      'zero:\u200b\u200c\u200d\u2060\u2061\u2064\ufeff shy:\u00ad end\n',
  );
  await fs.writeFile(path.join(fx.root, `name\u202eyp.txt`), 'bidi name\n');
}, 120_000);
afterAll(() => fx.cleanup());

/** Runs an async call; reports the longest event-loop block during it and the wall time. */
async function withLag<T>(fn: () => Promise<T>): Promise<{ value: T; lagMs: number; wallMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  const started = performance.now();
  const value = await fn();
  const wallMs = performance.now() - started;
  await new Promise((r) => setImmediate(r));
  histogram.disable();
  return { value, lagMs: histogram.count > 0 ? histogram.max / 1e6 : wallMs, wallMs };
}

const UNSAFE = /[\u0080-\u009f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/;

describe('blank-line floods through ls | grep', () => {
  it('ls | grep -h -r -v -e . over 20,000 blank lines returns in its budget without blocking the loop', async () => {
    const { value, lagMs, wallMs } = await withLag(() => runTool(fx.root, 'terminal', { command: 'ls | grep -h -r -v -e . flood' }));
    recordAttack('terminal', 'ls | grep -v . over 20,000 blank lines', lagMs < LAG_BUDGET_MS ? 'contained' : 'escaped');
    expect(value.status).not.toBe('error');
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
    expect(wallMs).toBeLessThan(SANDBOX_LIMITS.terminalTimeoutMs);
  }, 60_000);
});

describe('globbing over 2,000 files with 250-character names', () => {
  // 60 stars: just under the wildcard cap; each name still costs the matcher real work (a regression guard).
  const EXPENSIVE = `${'[a-z]*'.repeat(60)}Q`;
  // 600 stars: what blocked the loop before the cap (hundreds of ms per directory of long names).
  const TOO_MANY = `${'[a-z]*'.repeat(600)}Q`;

  it('a terminal glob word with more than 64 wildcards is refused at once, without blocking the loop', async () => {
    const { value, lagMs } = await withLag(() => runTool(fx.root, 'terminal', { command: `ls long/${TOO_MANY}` }));
    recordAttack(
      'terminal',
      'ls long/<600 stars> over 2,000 long names',
      value.status === 'error' && lagMs < LAG_BUDGET_MS ? 'refused' : 'escaped',
    );
    expect(value).toMatchObject({ status: 'error', message: expect.stringMatching(/more than 64 '\*' wildcards \(limit exceeded\)/) });
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
  });

  it('a terminal glob word under the cap is matched against every name without blocking the loop', async () => {
    const { value, lagMs } = await withLag(() => runTool(fx.root, 'terminal', { command: `ls long/${EXPENSIVE}` }));
    recordAttack('terminal', 'ls long/<60 stars> over 2,000 long names', lagMs < LAG_BUDGET_MS ? 'contained' : 'escaped');
    // No name matches, so the word stays literal (bash's rule) and the path guard refuses it.
    expect(value).toMatchObject({ status: 'error', message: expect.stringMatching(/No such file|is too long/i) });
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
  });

  it('expansion checks its deadline at every entry, not once per directory', async () => {
    // The deadline passes while the one directory is read and matched: only a per-entry check sees it.
    const deadline = Date.now() + 2;
    const result = await expandGlobWord(fx.root, fx.root, `long/${EXPENSIVE}`, deadline);
    const pastDeadlineMs = Date.now() - deadline;
    recordAttack('terminal', 'expansion of one big directory past the deadline', result !== null ? 'refused' : 'escaped');
    expect(result).toMatchObject({ refused: expect.stringMatching(/took longer than the command's time limit/) });
    expect(pastDeadlineMs).toBeLessThan(1000);
  });

  it.each(['rg', 'grep'] as const)('the glob tool [%s] refuses more than 64 wildcards without blocking the loop', async (engine) => {
    const { value, lagMs } = await withLag(() => runTool(fx.root, 'glob', { pattern: `long/${TOO_MANY}` }, { engine }));
    const viaGrep = await runTool(fx.root, 'grep', { pattern: 'x', glob: `long/${TOO_MANY}` }, { engine });
    recordAttack(
      'glob',
      `long/<600 stars> over 2,000 long names [${engine}]`,
      value.status === 'error' && viaGrep.status === 'error' && lagMs < LAG_BUDGET_MS ? 'refused' : 'escaped',
    );
    for (const r of [value, viaGrep])
      expect(r).toMatchObject({ status: 'error', message: expect.stringMatching(/more than 64 wildcards/) });
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
  });

  it.each(['rg', 'grep'] as const)('the glob tool [%s] matches a pattern under the cap without blocking the loop', async (engine) => {
    const { value, lagMs } = await withLag(() => runTool(fx.root, 'glob', { pattern: `long/${EXPENSIVE}` }, { engine }));
    recordAttack('glob', `long/<60 stars> over 2,000 long names [${engine}]`, lagMs < LAG_BUDGET_MS ? 'contained' : 'escaped');
    expect(value).toMatchObject({ status: 'ok', output: expect.stringMatching(/^No files match/) });
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
  });

  it('listing all 2,000 long names gives the same screenful and count on both engines', async () => {
    const results = await Promise.all(
      (['rg', 'grep'] as const).map((engine) => withLag(() => runTool(fx.root, 'glob', { pattern: 'long/*' }, { engine }))),
    );
    for (const { value, lagMs } of results) {
      expect(value).toMatchObject({ status: 'truncated', message: expect.stringMatching(/ of 2000 matching files shown/) });
      expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
    }
    expect(results[1]!.value.output).toBe(results[0]!.value.output);
  });

  it('ordinary patterns over the long names still work on both engines', async () => {
    const last = longName(LONG_NAMES - 1);
    for (const engine of ['rg', 'grep'] as const) {
      const result = await runTool(fx.root, 'glob', { pattern: `long/${last.slice(0, 20)}*` }, { engine });
      expect(result).toEqual({ status: 'ok', output: `long/${last}` });
    }
    expect(await expandGlobWord(fx.root, fx.root, `long/${last.slice(0, 20)}*`)).toEqual([`long/${last}`]);
  });
});

describe('validators of the command line are linear too', () => {
  it("find -printf with 30 '%00d' and then %l is refused at once (the old RegExp backtracked for minutes)", async () => {
    const command = `find src -printf '${'%00d'.repeat(30)}%l'`;
    const { value, lagMs } = await withLag(() => runTool(fx.root, 'terminal', { command }));
    recordAttack(
      'terminal',
      'find -printf validator backtracking',
      value.status === 'error' && lagMs < LAG_BUDGET_MS ? 'refused' : 'escaped',
    );
    expect(value).toMatchObject({ status: 'error', message: expect.stringMatching(/find -printf does not accept/) });
    expect(lagMs).toBeLessThan(LAG_BUDGET_MS);
    const allowed = await runTool(fx.root, 'terminal', { command: `find src -name app.py -printf '${'%00d'.repeat(30)}\\n'` });
    expect(allowed).toEqual({ status: 'ok', output: '1'.repeat(30) });
  });
});

describe('thread overrides', () => {
  it.each([
    'rg -j 0 helper src',
    'rg -j0 helper src',
    'rg --threads=0 helper src',
    'rg --threads 00 helper src',
    'rg -j 5 helper src',
    'rg -j 2 -j 0 helper src',
    'rg -nj0 helper src',
  ])('%s is refused (0 means automatic, one thread per core)', async (command) => {
    const result = await runTool(fx.root, 'terminal', { command });
    recordAttack('terminal', command, result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/at most 4 threads and at least 1 .*limit exceeded/) });
  });

  it('rg -j 2 still runs', async () => {
    const result = await runTool(fx.root, 'terminal', { command: 'rg -j 2 -l "class App" src' });
    expect(result).toEqual({ status: 'ok', output: 'src/app.py' });
  });
});

describe('the worker-wide memory budget', () => {
  const MiB = 1024 * 1024;

  it('weighted permits: six calls of 64 MiB against a 192 MiB budget never hold more than the budget', async () => {
    const slots = new Semaphore(64, 3 * 64 * MiB);
    const granted: number[] = [];
    const releases = Array.from({ length: 6 }, (_, k) => slots.acquire(1, {}, 64 * MiB).then((release) => (granted.push(k), release)));
    await new Promise((r) => setImmediate(r));
    expect(granted).toEqual([0, 1, 2]);
    expect(slots.bytesInUse).toBe(3 * 64 * MiB);
    expect(slots.inUse).toBe(3);
    (await releases[0]!)();
    await new Promise((r) => setImmediate(r));
    expect(granted).toEqual([0, 1, 2, 3]);
    for (const release of releases) (await release)();
    expect(granted).toEqual([0, 1, 2, 3, 4, 5]);
    expect(slots.bytesInUse).toBe(0);
    expect(slots.peakBytesInUse).toBe(3 * 64 * MiB);
    recordAttack('subprocess', 'six weighted permits against a three-permit byte budget', 'contained');
  });

  it('a heavy waiter at the head is not overtaken by light ones, and an impossible weight is refused', async () => {
    const slots = new Semaphore(64, 100);
    const held = await slots.acquire(1, {}, 60);
    const order: string[] = [];
    const heavy = slots.acquire(1, {}, 80).then((r) => (order.push('heavy'), r));
    const light = slots.acquire(1, {}, 10).then((r) => (order.push('light'), r));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    held();
    (await heavy)();
    (await light)();
    expect(order).toEqual(['heavy', 'light']);
    await expect(slots.acquire(1, {}, 101)).rejects.toThrow(/memory caps add up to .* more than the sandbox's whole memory budget/);
  });

  it('the process-wide budget is half the machine by default and configurable', () => {
    expect(subprocessSlots.byteCapacity).toBeLessThanOrEqual(os.totalmem() / 2);
    expect(subprocessSlots.byteCapacity).toBeGreaterThanOrEqual(SANDBOX_LIMITS.maxPipelineStages * SANDBOX_LIMITS.childAddressSpaceBytes);
    expect(sandboxMemoryBudgetBytes(8 * 1024 * MiB, '0.25')).toBe(2 * 1024 * MiB);
    expect(() => sandboxMemoryBudgetBytes(8 * 1024 * MiB, '2')).toThrow(
      /CODEGREP_SANDBOX_MEMORY_FRACTION must be a number in \(0, 1\], got "2"/,
    );
    // At the default caps the worst case, every permit in use, stays inside the budget.
    const worst = Math.min(subprocessSlots.capacity, Math.floor(subprocessSlots.byteCapacity / SANDBOX_LIMITS.childAddressSpaceBytes));
    expect(worst * SANDBOX_LIMITS.childAddressSpaceBytes).toBeLessThanOrEqual(os.totalmem() / 2);
  });

  it('a pipeline holds one address-space cap per stage', async () => {
    const slots = new Semaphore(64, 1024 * MiB);
    const cat = findExecutable('cat')!;
    const run = await runPipeline(
      [
        { executable: cat, args: ['lines.txt'] },
        { executable: cat, args: [] },
        { executable: cat, args: [] },
      ],
      { cwd: fx.root, timeoutMs: 10_000, onStdout: () => 'more', slots, resourceLimits: { addressSpaceBytes: 100 * MiB } },
    );
    expect(run.stages.map((s) => s.exitCode)).toEqual([0, 0, 0]);
    expect(slots.peakBytesInUse).toBe(300 * MiB);
    expect(slots.bytesInUse).toBe(0);
  });

  it('six concurrent regex bombs never hold more than the budget, and each is stopped by its cap', async () => {
    const cap = 128 * MiB;
    const slots = new Semaphore(64, 3 * cap);
    const grep = findExecutable('grep')!;
    const runs = await Promise.all(
      Array.from({ length: 6 }, () =>
        runPipeline([{ executable: grep, args: ['-E', '-e', 'a{32767}{32767}', '--', 'src/app.py'] }], {
          cwd: fx.root,
          timeoutMs: 30_000,
          onStdout: () => 'more',
          slots,
          resourceLimits: { addressSpaceBytes: cap },
        }),
      ),
    );
    recordAttack(
      'subprocess',
      'six concurrent bombs against the weighted budget',
      slots.peakBytesInUse <= 3 * cap && runs.every((r) => r.stages[0]!.limitExceeded === 'memory') ? 'contained' : 'escaped',
    );
    expect(runs.map((r) => r.stages[0]!.limitExceeded)).toEqual(Array(6).fill('memory'));
    expect(slots.peakBytesInUse).toBe(3 * cap);
    expect(slots.peakInUse).toBe(3);
    expect(slots.bytesInUse).toBe(0);
  }, 60_000);
});

describe('alternation width counts in the regex limits', () => {
  const WIDE = `(${Array.from({ length: 200 }, (_, k) => `w${k}`).join('|')}){1000}`;
  const LONG_GROUP = `(${'abcdefghij'.repeat(11)}){1000}`;
  it.each([
    ['grep', { pattern: WIDE }, 'rg'],
    ['grep', { pattern: WIDE }, 'grep'],
    ['grep', { pattern: LONG_GROUP }, 'grep'],
    ['terminal', { command: `grep -E '${WIDE}' src/app.py` }, undefined],
    ['terminal', { command: `rg -e '${LONG_GROUP}' src` }, undefined],
    ['terminal', { command: `find . -regex '${WIDE}'` }, undefined],
    ['terminal', { command: `grep '\\(${Array.from({ length: 150 }, (_, k) => `b${k}`).join('\\|')}\\)\\{1000\\}' src/app.py` }, undefined],
  ] as const)('%s %s [%s] is refused as too many states', async (tool, args, engine) => {
    const result = await runTool(fx.root, tool, args, engine ? { engine } : {});
    recordAttack(
      tool,
      `alternation width ${JSON.stringify(args).slice(0, 50)} ${engine ?? ''}`,
      result.status === 'error' ? 'refused' : 'escaped',
    );
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/limit exceeded/) });
  });

  it('narrow alternations and sequential counts still run', async () => {
    expect(await runTool(fx.root, 'grep', { pattern: '(def|class) (helper|App){1,2}' })).toMatchObject({ status: 'ok' });
    expect(await runTool(fx.root, 'terminal', { command: "grep -cE '(a|b){3}x{0,200}' src/app.py" })).toMatchObject({ status: 'ok' });
  });
});

describe('a timed-out call never claims partial output it does not have', () => {
  const CATASTROPHIC = '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$';
  it('terminal: a command killed before printing says so', async () => {
    const result = await runTool(fx.root, 'terminal', { command: `grep -E '${CATASTROPHIC}' catastrophic.txt` }, { timeoutMs: 300 });
    recordAttack('terminal', 'timeout with no output (load case X01)', /partial/.test(result.message ?? '') ? 'escaped' : 'contained');
    expect(result).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/timed out after 300 ms and was killed before it printed anything/),
    });
    expect(result.message).not.toMatch(/partial/);
  });

  it('grep: a search stopped before any match says so', async () => {
    const result = await runTool(fx.root, 'grep', { pattern: CATASTROPHIC, path: 'catastrophic.txt' }, { engine: 'grep', timeoutMs: 300 });
    recordAttack('grep', 'timeout with no match', /partial/.test(result.message ?? '') ? 'escaped' : 'contained');
    expect(result).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/timed out after 300 ms .*no match had been found by then/),
    });
    expect(result.message).not.toMatch(/partial/);
  });
});

describe('C1, bidi and zero-width characters never reach the transcript', () => {
  it('sanitizeText replaces every one of them with U+FFFD', () => {
    const all = [
      ...Array.from({ length: 0x20 }, (_, k) => 0x80 + k),
      0xad,
      0x61c,
      0x200b,
      0x200c,
      0x200d,
      0x200e,
      0x200f,
      0x202a,
      0x202b,
      0x202c,
      0x202d,
      0x202e,
      0x2060,
      0x2061,
      0x2062,
      0x2063,
      0x2064,
      0x2066,
      0x2067,
      0x2068,
      0x2069,
      0xfeff,
    ].map((c) => String.fromCharCode(c));
    expect(sanitizeText(all.join('')).text).toBe('\uFFFD'.repeat(all.length));
    expect(sanitizeText('plain ünïcödé — 😀\ttab').text).toBe('plain ünïcödé — 😀\ttab');
  });

  const outputs: Array<[string, string, unknown]> = [
    ['terminal cat', 'terminal', { command: 'cat unsafe.txt' }],
    ['read', 'read', { path: 'unsafe.txt' }],
    ['grep', 'grep', { pattern: 'csi', path: 'unsafe.txt' }],
    ['glob of a bidi name', 'glob', { pattern: 'name*' }],
    ['terminal ls of a bidi name', 'terminal', { command: 'ls' }],
  ];
  it.each(outputs)('%s shows U+FFFD or ? instead', async (label, tool, args) => {
    const result: ToolResult = await runTool(fx.root, tool, args);
    recordAttack(tool, `C1/bidi/zero-width through ${label}`, UNSAFE.test(result.output) ? 'escaped' : 'contained');
    expect(result.status).toBe('ok');
    expect(result.output).not.toMatch(UNSAFE);
    expect(result.output).toMatch(/\uFFFD|name\?yp\.txt/);
  });
});
