import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runEditor } from '../../lib/downstream/agents/editor';
import { compileGlob } from '../../lib/sandbox/glob-match';
import { terminal } from '../../lib/sandbox/terminal';
import { expandGlobWord } from '../../lib/sandbox/terminal-expand';
import { recordAttack } from './attack-log';

/**
 * Finding 2: nothing in-process can stall the worker. Each hostile input gets a 100 ms budget for the
 * in-process work (the backtracking versions took 81.6 s for the glob word and 6.3 s / > 60 s for
 * str_replace on 400 KB / 750 KB files).
 */
const BUDGET_MS = 100;
let root: string;
const LONG_NAME = 'test_a_very_long_name_for_a_module.py'; // 38 characters, like the issue's

beforeAll(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-stalls-')));
  await fs.mkdir(path.join(root, 'tests'));
  for (let k = 0; k < 200; k++) await fs.writeFile(path.join(root, 'tests', k === 0 ? LONG_NAME : `${'a'.repeat(30)}_${k}.py`), '');
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

function timed<T>(fn: () => T): { value: T; ms: number } {
  const started = performance.now();
  const value = fn();
  return { value, ms: performance.now() - started };
}

/**
 * Runs an async call and reports the longest time the event loop was blocked during it (what stalls every
 * other tool call in the worker), measured with a 5 ms event-loop-delay histogram, and the wall time.
 * File-system waits do not block the loop, so a loaded disk cannot fail the budget; in-process work does.
 */
async function timedAsync<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number; wallMs: number }> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  const started = performance.now();
  const value = await fn();
  const wallMs = performance.now() - started;
  await new Promise((r) => setImmediate(r));
  histogram.disable();
  return { value, ms: histogram.count > 0 ? histogram.max / 1e6 : wallMs, wallMs };
}

const HOSTILE_WORDS = [
  `tests/${'*'.repeat(30)}Z`,
  `tests/${'*a'.repeat(30)}Z`,
  `tests/${'?*'.repeat(40)}Z`,
  `tests/${'[a-z]*'.repeat(25)}Z`,
  `${'*/'.repeat(8)}${'*'.repeat(30)}Z`,
];

describe('finding 2: terminal glob expansion is linear', () => {
  it.each(HOSTILE_WORDS)('expands %s without blocking the loop for 100 ms', async (word) => {
    const { value, ms } = await timedAsync(() => expandGlobWord(root, root, word));
    recordAttack('terminal', `glob expansion ${word.slice(0, 40)}`, ms < BUDGET_MS ? 'contained' : 'escaped');
    expect(value).toBeNull();
    expect(ms).toBeLessThan(BUDGET_MS);
  });

  it("the whole terminal call with the issue's word answers within a second and says no such file", async () => {
    const { value, ms } = await timedAsync(() => terminal(root, { command: `ls tests/${'*'.repeat(30)}Z` }));
    recordAttack('terminal', 'ls tests/ + 30 stars + Z (end to end)', value.status === 'error' ? 'refused' : 'escaped');
    expect(value).toMatchObject({ status: 'error', message: expect.stringMatching(/no such file/) });
    expect(ms).toBeLessThan(1000);
  });

  it('still expands ordinary patterns', async () => {
    expect(await expandGlobWord(root, root, 'tests/test_*.py')).toEqual([`tests/${LONG_NAME}`]);
    expect(await expandGlobWord(root, root, 'tests/[t]e?t_*')).toEqual([`tests/${LONG_NAME}`]);
  });
});

describe('finding 2: the GNU-fallback glob matcher is linear', () => {
  const longPath = `${'dir/'.repeat(200)}${'a'.repeat(1000)}.py`;
  it.each([
    '*'.repeat(30) + 'Z',
    `${'*a'.repeat(40)}Z`,
    `${'**/'.repeat(40)}*Z`,
    `{${'*a,'.repeat(20)}*}${'*a'.repeat(20)}Z`,
    `${'[!/]*'.repeat(30)}Z`,
  ])('matches %s against an 1800-character path and 1000 file names within 100 ms', (pattern) => {
    const compiled = compileGlob(pattern);
    expect(compiled.ok).toBe(true);
    if (!compiled.ok) return;
    const { value, ms } = timed(() => {
      let hits = 0;
      if (compiled.glob.matches(longPath)) hits += 1;
      for (let k = 0; k < 1000; k++) if (compiled.glob.matches(`src/pkg/${k}_${LONG_NAME}`)) hits += 1;
      return hits;
    });
    recordAttack('glob', `fallback matcher ${pattern.slice(0, 40)}`, ms < BUDGET_MS ? 'contained' : 'escaped');
    expect(value).toBe(0);
    expect(ms).toBeLessThan(BUDGET_MS);
  });
});

describe('finding 2: str_replace is linear with capped messages', () => {
  // 4 MiB is the editor's largest file; reading and decoding it is most of that case's time.
  it.each([
    [400, BUDGET_MS],
    [750, BUDGET_MS],
    [4000, 5 * BUDGET_MS],
  ])('a %i KB file of repeated matches is refused, blocking the loop under %i ms, with a short message', async (kb, budget) => {
    const file = path.join(root, `many-${kb}.txt`);
    await fs.writeFile(file, 'x = 1\n'.repeat(Math.floor((kb * 1024) / 6)));
    const { value, ms } = await timedAsync(() =>
      runEditor(root, { command: 'str_replace', path: `many-${kb}.txt`, old_str: 'x = 1', new_str: 'y' }),
    );
    recordAttack(
      'editor',
      `str_replace with every line matching (${kb} KB)`,
      value.status === 'error' && ms < budget ? 'refused' : 'escaped',
    );
    expect(value).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/Multiple occurrences .* in lines \[1, 2, 3, .*, 20, … \(\d+ occurrences in all\)\]/),
    });
    expect(value.message!.length).toBeLessThan(600);
    expect(ms).toBeLessThan(budget);
  });

  it('a huge old_str is echoed cut, never whole', async () => {
    await fs.writeFile(path.join(root, 'small.txt'), 'abc\n');
    const result = await runEditor(root, { command: 'str_replace', path: 'small.txt', old_str: 'q'.repeat(100_000), new_str: 'y' });
    recordAttack(
      'editor',
      'str_replace with a 100k-character old_str that does not match',
      result.status === 'error' ? 'refused' : 'escaped',
    );
    expect(result.status).toBe('error');
    expect(result.message!.length).toBeLessThan(600);
  });

  it('one match among many lines is still replaced, with the right line in the snippet', async () => {
    await fs.writeFile(path.join(root, 'one.txt'), `${'filler\n'.repeat(5000)}target\n${'filler\n'.repeat(10)}`);
    const { value, ms } = await timedAsync(() =>
      runEditor(root, { command: 'str_replace', path: 'one.txt', old_str: 'target', new_str: 'done' }),
    );
    expect(value.status).toBe('ok');
    expect(value.output).toContain('  5001\tdone');
    expect(ms).toBeLessThan(BUDGET_MS * 5);
  });
});

describe('finding 2/4: glob expansion is bounded by the command deadline', () => {
  it('a deep */*/*/… expansion over a wide tree stops at the deadline with a clear refusal', async () => {
    const wide = path.join(root, 'wide');
    for (let a = 0; a < 30; a++) for (let b = 0; b < 30; b++) await fs.mkdir(path.join(wide, `a${a}`, `b${b}`), { recursive: true });
    const started = Date.now();
    const result = await expandGlobWord(root, root, 'wide/*/*/*Z', Date.now() + 5);
    recordAttack(
      'terminal',
      'deep glob expansion past the deadline',
      typeof result === 'object' && result !== null && 'refused' in result ? 'refused' : 'escaped',
    );
    expect(result).toMatchObject({ refused: expect.stringMatching(/took longer than the command's time limit/) });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
