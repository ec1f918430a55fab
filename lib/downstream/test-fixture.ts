import { execFileSync } from 'node:child_process';
import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DownstreamInstanceSchema, type DownstreamInstance, type DownstreamInstanceInput } from '../../schemas/downstream';
import { git } from '../worktrees/git';
import { gitRunWorktrees, type RunWorktreeFactory } from './run-worktree';

/**
 * A real git repository for the downstream tests: a tiny Python package `calc` whose `add` has a bug
 * (`a - b`), its tests (`test_add` fails before the fix, `test_mul` passes), a test that hangs (writing its
 * pid first, so a test can check it was killed) and the gold fix as a real `git diff`. It is published as a
 * bare mirror, and fresh checkouts come from lib/downstream's gitRunWorktrees over lib/worktrees' clones,
 * exactly as in a run. The run directory's name holds a space, so paths with spaces are always exercised.
 */
export const REPO = 'acme/calc';

export const OPS_PY = ['def add(a, b):', '    return a - b', '', '', 'def mul(a, b):', '    return a * b', ''].join('\n');
export const TEST_OPS_PY = [
  'from calc.ops import add, mul',
  '',
  '',
  'def test_add():',
  '    assert add(2, 3) == 5',
  '',
  '',
  'def test_mul():',
  '    assert mul(2, 3) == 6',
  '',
].join('\n');
const TEST_SLOW_PY = [
  'import os',
  'import time',
  '',
  '',
  'def test_hang():',
  "    with open(os.environ['HANG_PID_FILE'], 'w') as f:",
  '        f.write(str(os.getpid()))',
  '    time.sleep(120)',
  '',
].join('\n');
const NEW_TEST_PY = ['from calc.ops import add', '', '', 'def test_add_negative():', '    assert add(-2, -3) == -5', ''].join('\n');
const TEST_OPS_WITH_ZERO_PY = `${TEST_OPS_PY}\n\ndef test_add_zero():\n    assert add(0, 7) == 7\n`;

export interface DownstreamFixture {
  parent: string;
  worktrees: RunWorktreeFactory;
  runDir: string;
  baseCommit: string;
  /** `return a - b` → `return a + b`, as `git diff` writes it. */
  goldPatch: string;
  /** SWE-bench's test_patch of the instance: adds tests/test_new.py and `test_add_zero` to tests/test_ops.py. */
  testPatch: string;
  instance: DownstreamInstance;
  /** A Python with pytest (`python3` when it has pytest, else the project venv's), as an absolute path. */
  python: string;
  cleanup(): Promise<void>;
}

const G = { timeoutMs: 60_000 };
const IDENTITY = ['-c', 'user.name=codegrep', '-c', 'user.email=codegrep@localhost', '-c', 'commit.gpgsign=false'];

/** The real executable (not a pyenv shim, whose bash start-up costs a second on a loaded machine). */
export function pythonWithPytest(): string {
  for (const candidate of ['python3', path.resolve(process.cwd(), '.venv/bin/python')]) {
    try {
      execFileSync(candidate, ['-m', 'pytest', '--version'], { stdio: 'ignore', timeout: 60_000 });
      return execFileSync(candidate, ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8', timeout: 60_000 }).trim();
    } catch {
      // try the next one
    }
  }
  throw new Error('no Python with pytest found (tried python3 and .venv/bin/python)');
}

async function write(root: string, relative: string, text: string): Promise<void> {
  await fs.mkdir(path.dirname(path.join(root, relative)), { recursive: true });
  await fs.writeFile(path.join(root, relative), text);
}

export async function makeDownstreamFixture(): Promise<DownstreamFixture> {
  const parent = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-downstream-'));
  const source = path.join(parent, 'source');
  await git(['init', '--quiet', '--initial-branch=main', source], G);
  await write(source, 'calc/__init__.py', '');
  await write(source, 'calc/ops.py', OPS_PY);
  await write(source, 'tests/test_ops.py', TEST_OPS_PY);
  await write(source, 'tests/test_slow.py', TEST_SLOW_PY);
  await write(source, '.gitignore', '__pycache__/\n*.pyc\n');
  await git(['add', '--all'], { ...G, cwd: source });
  await git([...IDENTITY, 'commit', '--quiet', '-m', 'calc with a bug'], { ...G, cwd: source });
  const baseCommit = (await git(['rev-parse', 'HEAD'], { ...G, cwd: source })).trim();

  await write(source, 'calc/ops.py', OPS_PY.replace('return a - b', 'return a + b'));
  const goldPatch = await git(['diff'], { ...G, cwd: source });
  await git(['checkout', '--', 'calc/ops.py'], { ...G, cwd: source });
  await write(source, 'tests/test_new.py', NEW_TEST_PY);
  await write(source, 'tests/test_ops.py', TEST_OPS_WITH_ZERO_PY);
  await git(['add', '--intent-to-add', 'tests/test_new.py'], { ...G, cwd: source });
  const testPatch = await git(['diff'], { ...G, cwd: source });
  await git(['rm', '--quiet', '--cached', 'tests/test_new.py'], { ...G, cwd: source });
  await fs.rm(path.join(source, 'tests/test_new.py'));
  await git(['checkout', '--', 'tests/test_ops.py'], { ...G, cwd: source });

  const mirrors = path.join(parent, 'mirrors');
  await fs.mkdir(mirrors);
  await git(['clone', '--quiet', '--bare', source, path.join(mirrors, 'acme__calc.git')], G);
  const runDir = path.join(parent, 'runs dir');
  const worktrees = gitRunWorktrees({ cacheDir: path.join(parent, 'cache'), runDir, source: { kind: 'mirror-dir', dir: mirrors } });

  const instance = makeInstance({
    instance_id: 'acme__calc-1',
    repo: REPO,
    base_commit: baseCommit,
    problem_statement: 'add(2, 3) returns -1 instead of 5.\n',
    patch: goldPatch,
    FAIL_TO_PASS: ['tests/test_ops.py::test_add'],
    PASS_TO_PASS: ['tests/test_ops.py::test_mul'],
  });
  return {
    parent,
    worktrees,
    runDir,
    baseCommit,
    goldPatch,
    testPatch,
    instance,
    python: pythonWithPytest(),
    cleanup: () => fs.rm(parent, { recursive: true, force: true }),
  };
}

export function makeInstance(input: DownstreamInstanceInput): DownstreamInstance {
  return DownstreamInstanceSchema.parse(input);
}

/** Directories left in the run directory (a disposed checkout leaves none). */
export async function leftoverRuns(fixture: DownstreamFixture): Promise<string[]> {
  return fs.readdir(fixture.runDir).catch(() => []);
}
