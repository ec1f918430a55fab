import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { DownstreamInstance, HarnessResult, TestStatus } from '../../../schemas/downstream';
import { parseUnifiedDiff } from '../../patch/parse-diff';
import { gitEnv, runGit, type GitRun } from '../../worktrees/git';
import { compileCommand, type CommandTemplate, type CompiledCommand } from '../runs/command-template';
import { djangoLabelsForFiles, djangoLabelsForTests, djangoPassed, normalizeDjangoTestName, parseDjangoLog } from './django-log';
import { errorResult, type Harness } from './harness';
import { parsePytestSummary, pytestPassed } from './pytest-log';
import { describeExit, runProcess, tail, type ProcessResult } from '../runs/run-process';
import type { RunWorktree, RunWorktreeFactory } from '../runs/run-worktree';

/**
 * A harness without Docker: the patch (and the instance's `test_patch`) applied in a fresh checkout at the
 * base commit, then the instance's FAIL_TO_PASS and PASS_TO_PASS tests run with a configured interpreter.
 * It fits repositories whose test dependencies the interpreter already has (a project venv); SWE-bench's
 * own Docker harness is swebench-adapter.ts.
 *
 * Steps and outcomes:
 * 1. An empty patch is `unresolved` without running anything (SWE-bench's "empty patch": nothing to test).
 * 2. `git apply --verbose` of the patch; a patch that does not apply is `patch_failed`.
 * 3. The test patch, as SWE-bench's eval script does it: the files it touches are first reset to the base
 *    commit (files the model added there are removed), so the model cannot pre-empt the tests; a test patch
 *    that still does not apply is `error` (the instance's fault, not the model's).
 * 4. The tests, under ONE deadline for the whole run (`timeoutMs`); past it every process group is killed
 *    and the outcome is `timeout`. A missing interpreter is `error` naming it.
 * 5. `resolved` iff every FAIL_TO_PASS and every PASS_TO_PASS test passed (SWE-bench's FULL resolution).
 *
 * Test runners:
 * - `pytest`: `<interpreter> -m pytest -rA -p no:cacheprovider --color=no <test ids…>`, statuses from the
 *   `-rA` summary (PASSED and XFAIL pass). `-m` puts the checkout on sys.path as SWE-bench's images do.
 *   No `-x`: stopping at the first failure would leave the other tests without a status to report.
 * - `django`: `<interpreter> tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1 <labels>`
 *   (SWE-bench's django command) with the test classes named by the lists, or the test patch's modules.
 * - `{ argv: [...] }`: a custom command run once per test with `{interpreter}` and `{test}` placeholders;
 *   exit code 0 passes. Every argument is substituted separately (see command-template.ts).
 */
export type TestRunner = 'pytest' | 'django' | { argv: CommandTemplate };

export interface LocalHarnessOptions {
  worktrees: RunWorktreeFactory;
  /** A program name looked up on PATH (`python3`) or a path (`/work/main/.venv/bin/python`). */
  interpreter: string;
  testRunner: TestRunner;
  /** Wall-clock limit of the whole test phase of one evaluation. */
  timeoutMs: number;
  /** Added to the inherited environment of the test processes. */
  env?: Record<string, string>;
  name?: string;
}

const GIT_TIMEOUT_MS = 120_000;

interface TestRun {
  failToPass: TestStatus[];
  passToPass: TestStatus[];
  outcome?: 'timeout' | 'error';
  log: string;
}

function resolveInterpreter(interpreter: string): string {
  // A relative path with a slash is relative to the caller's directory, not to the checkout the tests run in.
  return interpreter.includes('/') ? path.resolve(interpreter) : interpreter;
}

function testEnv(extra: Record<string, string> | undefined): NodeJS.ProcessEnv {
  // gitEnv() drops inherited GIT_DIR-style variables: a test that shells out to git must see this checkout.
  const env: NodeJS.ProcessEnv = { ...gitEnv(), LC_ALL: 'C.UTF-8', LANGUAGE: 'C', PYTHONDONTWRITEBYTECODE: '1', ...extra };
  delete env.PYTEST_ADDOPTS;
  return env;
}

function interpreterMissing(result: ProcessResult, interpreter: string): string | null {
  if (!result.spawnError) return null;
  if (result.spawnError.code === 'ENOENT')
    return `interpreter ${JSON.stringify(interpreter)} not found (not on PATH and not an existing file)`;
  if (result.spawnError.code === 'EACCES') return `interpreter ${JSON.stringify(interpreter)} is not executable`;
  return `could not start interpreter ${JSON.stringify(interpreter)}: ${result.spawnError.message}`;
}

/** What every evaluation of one harness shares: its options, checked and resolved once. */
interface TestSetup {
  interpreter: string;
  /** The custom per-test command; null for the pytest and django runners. */
  custom: CompiledCommand | null;
  runnerName: 'pytest' | 'django' | 'custom';
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
}

function testSetup(options: LocalHarnessOptions): TestSetup {
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
    throw new RangeError(`local harness: timeoutMs must be positive, got ${options.timeoutMs}`);
  if (options.interpreter.trim() === '') throw new RangeError('local harness: interpreter must name a program');
  const interpreter = resolveInterpreter(options.interpreter);
  const custom: CompiledCommand | null =
    typeof options.testRunner === 'object' ? compileCommand(options.testRunner.argv, ['interpreter', 'test']) : null;
  if (custom && !custom.placeholders.has('test')) {
    throw new RangeError(`local harness: the custom test command ${custom.template} must contain {test}`);
  }
  const env = testEnv(options.env);
  const runnerName = typeof options.testRunner === 'string' ? options.testRunner : 'custom';
  return { interpreter, custom, runnerName, env, timeoutMs: options.timeoutMs };
}

export function createLocalHarness(options: LocalHarnessOptions): Harness {
  const setup = testSetup(options);
  return {
    name: options.name ?? `local:${setup.runnerName}`,
    evaluate: (instance, patch, evalOptions = {}) => evaluateInstance(options.worktrees, setup, instance, patch, evalOptions.signal),
  };
}

/** Steps 1 to 5 of the header for one instance, in a checkout of its own that is always disposed. */
async function evaluateInstance(
  worktrees: RunWorktreeFactory,
  setup: TestSetup,
  instance: DownstreamInstance,
  patch: string,
  signal: AbortSignal | undefined,
): Promise<HarnessResult> {
  if (instance.FAIL_TO_PASS.length === 0 && instance.PASS_TO_PASS.length === 0) {
    return errorResult(`instance ${instance.instance_id} has no FAIL_TO_PASS or PASS_TO_PASS tests; the local harness cannot judge it`);
  }
  if (patch.trim() === '') {
    return {
      resolved: false,
      outcome: 'unresolved',
      log: 'empty patch: the agent changed nothing, so no test was run',
      failToPass: [],
      passToPass: [],
    };
  }
  let worktree: RunWorktree;
  try {
    worktree = await worktrees.create(instance.repo, instance.base_commit, `harness-${instance.instance_id}`);
  } catch (error) {
    if (signal?.aborted) throw error;
    return errorResult(
      `could not make a checkout of ${instance.repo}@${instance.base_commit}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const logs: string[] = [];
  try {
    const git: Git = (args) =>
      runGit(args, { cwd: worktree.path, timeoutMs: GIT_TIMEOUT_MS, hardened: true, ...(signal ? { signal } : {}) });
    const notApplied = (await applyModelPatch(git, worktree, patch, logs)) ?? (await applyTestPatch(git, worktree, instance, logs));
    if (notApplied) return notApplied;

    const run = await runTests(setup, instance, worktree.path, signal);
    logs.push(run.log);
    const allPassed = [...run.failToPass, ...run.passToPass].every((t) => t.passed);
    const outcome = run.outcome ?? (allPassed ? 'resolved' : 'unresolved');
    if (outcome === 'timeout') logs.push(`[timeout: the tests ran past ${setup.timeoutMs} ms; every process was killed]`);
    return { resolved: outcome === 'resolved', outcome, log: logs.join('\n'), failToPass: run.failToPass, passToPass: run.passToPass };
  } catch (error) {
    if (signal?.aborted) throw error;
    return errorResult(`${logs.join('\n')}\nlocal harness failed: ${error instanceof Error ? error.message : String(error)}`);
  } finally {
    await worktree.dispose().catch(() => undefined);
  }
}

/** git in the evaluation's checkout, under the harness's time limit and the run's signal. */
type Git = (args: string[]) => Promise<GitRun>;

/** Step 2: the model's patch; the result when it does not apply, else null. */
async function applyModelPatch(git: Git, worktree: RunWorktree, patch: string, logs: string[]): Promise<HarnessResult | null> {
  const patchFile = path.join(worktree.scratch, 'model.patch');
  await fs.writeFile(patchFile, patch.endsWith('\n') ? patch : `${patch}\n`);
  const applied = await git(['apply', '--verbose', '--whitespace=nowarn', patchFile]);
  logs.push(`$ git apply --verbose model.patch → exit ${applied.code}\n${tail(applied.stdout + applied.stderr, 4000)}`);
  if (applied.code !== 0) {
    return { resolved: false, outcome: 'patch_failed', log: logs.join('\n'), failToPass: [], passToPass: [] };
  }
  return null;
}

/** Step 3: the instance's test patch over reset test files; the result when it cannot be applied, else null. */
async function applyTestPatch(
  git: Git,
  worktree: RunWorktree,
  instance: DownstreamInstance,
  logs: string[],
): Promise<HarnessResult | null> {
  if (!instance.test_patch) return null;
  let testFiles: string[];
  try {
    testFiles = [
      ...new Set(parseUnifiedDiff(instance.test_patch).flatMap((f) => [f.path, ...(f.newPath && f.newPath !== f.path ? [f.newPath] : [])])),
    ];
  } catch (error) {
    return errorResult(
      `${logs.join('\n')}\ninstance ${instance.instance_id}: test_patch is not a readable diff: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  for (const file of testFiles) {
    const atBase = await git(['cat-file', '-e', `${instance.base_commit}:${file}`]);
    if (atBase.code === 0) await git(['checkout', instance.base_commit, '--', file]);
    else await fs.rm(path.join(worktree.path, file), { force: true });
  }
  const testPatchFile = path.join(worktree.scratch, 'test.patch');
  await fs.writeFile(testPatchFile, instance.test_patch.endsWith('\n') ? instance.test_patch : `${instance.test_patch}\n`);
  const testApplied = await git(['apply', '--verbose', '--whitespace=nowarn', testPatchFile]);
  logs.push(
    `$ git apply --verbose test.patch (after resetting ${testFiles.length} test file(s)) → exit ${testApplied.code}\n${tail(testApplied.stdout + testApplied.stderr, 4000)}`,
  );
  if (testApplied.code !== 0) return errorResult(`${logs.join('\n')}\nthe instance's test_patch does not apply after the model patch`);
  return null;
}

/** One evaluation's test phase: the harness's setup, the instance, where its processes run, and by when. */
interface TestPhase {
  setup: TestSetup;
  instance: DownstreamInstance;
  /** What every test process is started with. */
  common: { cwd: string; env: NodeJS.ProcessEnv; signal?: AbortSignal };
  deadline: number;
}

/** Step 4, under one deadline for the whole test phase. */
async function runTests(
  setup: TestSetup,
  instance: DownstreamInstance,
  checkout: string,
  signal: AbortSignal | undefined,
): Promise<TestRun> {
  const deadline = Date.now() + setup.timeoutMs;
  const phase: TestPhase = { setup, instance, common: { cwd: checkout, env: setup.env, ...(signal ? { signal } : {}) }, deadline };
  if (setup.custom) return runCustomTests(phase, setup.custom);
  return runTestSuite(phase);
}

/** The custom command, once per test, until the deadline passes or the interpreter cannot start. */
async function runCustomTests(phase: TestPhase, custom: CompiledCommand): Promise<TestRun> {
  const { setup, common, deadline } = phase;
  const { interpreter } = setup;
  const f2p = phase.instance.FAIL_TO_PASS;
  const p2p = phase.instance.PASS_TO_PASS;
  const passed = new Map<string, boolean>();
  const logs: string[] = [];
  for (const test of [...new Set([...f2p, ...p2p])]) {
    const remaining = deadline - Date.now();
    const argv = custom.render({ interpreter, test });
    const result = remaining > 0 ? await runProcess(argv, { ...common, timeoutMs: remaining }) : null;
    if (result === null || result.timedOut) {
      logs.push(
        `$ ${JSON.stringify(argv)}\n${result ? tail(result.stdout + result.stderr) : ''}\n[timed out: the test phase is limited to ${setup.timeoutMs} ms]`,
      );
      return { ...statusesFrom(f2p, p2p, passed), outcome: 'timeout', log: logs.join('\n') };
    }
    const missing = interpreterMissing(result, interpreter);
    if (missing && argv[0] === interpreter)
      return { ...statusesFrom(f2p, p2p, passed), outcome: 'error', log: `${logs.join('\n')}\n${missing}` };
    if (result.spawnError)
      return { ...statusesFrom(f2p, p2p, passed), outcome: 'error', log: `${logs.join('\n')}\n${describeExit(result)}` };
    passed.set(test, result.exitCode === 0);
    logs.push(`$ ${JSON.stringify(argv)} → ${describeExit(result)}\n${tail(result.stdout + result.stderr, 2000)}`);
  }
  return { ...statusesFrom(f2p, p2p, passed), log: logs.join('\n') };
}

/** The pytest or django runner: one process for every test, statuses read from its log. */
async function runTestSuite(phase: TestPhase): Promise<TestRun> {
  const { setup, instance, common, deadline } = phase;
  const { interpreter } = setup;
  const f2p = instance.FAIL_TO_PASS;
  const p2p = instance.PASS_TO_PASS;
  let argv: string[];
  if (setup.runnerName === 'pytest') {
    argv = [interpreter, '-m', 'pytest', '-rA', '-p', 'no:cacheprovider', '--color=no', ...new Set([...f2p, ...p2p])];
  } else {
    const { labels, unmapped } = djangoTestLabels(instance);
    if (labels.length === 0)
      return {
        failToPass: [],
        passToPass: [],
        outcome: 'error',
        log: `cannot derive django test labels from ${JSON.stringify(unmapped.slice(0, 3))}`,
      };
    argv = [interpreter, 'tests/runtests.py', '--verbosity', '2', '--settings=test_sqlite', '--parallel', '1', ...labels];
  }
  const result = await runProcess(argv, { ...common, timeoutMs: Math.max(1, deadline - Date.now()) });
  const header = `$ ${argv.map((a) => JSON.stringify(a)).join(' ')}\n→ ${describeExit(result, setup.timeoutMs)}\n`;
  const output = `${result.stdout}\n${result.stderr}`;
  const log = header + tail(output, 20_000);
  const missing = interpreterMissing(result, interpreter);
  if (missing)
    return {
      failToPass: f2p.map((test) => ({ test, passed: false })),
      passToPass: p2p.map((test) => ({ test, passed: false })),
      outcome: 'error',
      log: `${header}${missing}`,
    };

  const run = statusesFrom(f2p, p2p, suitePassed(setup.runnerName, output, [...f2p, ...p2p]));
  if (result.timedOut) return { ...run, outcome: 'timeout', log };
  if (result.aborted) throw common.signal?.reason ?? new Error('local harness: cancelled');
  return { ...run, log };
}

/** The django runner's labels: the test classes the lists name, and the test patch's modules when some name none. */
function djangoTestLabels(instance: DownstreamInstance): { labels: string[]; unmapped: string[] } {
  const { labels, unmapped } = djangoLabelsForTests([...instance.FAIL_TO_PASS, ...instance.PASS_TO_PASS]);
  const fromPatch =
    unmapped.length > 0 && instance.test_patch ? djangoLabelsForFiles(parseUnifiedDiff(instance.test_patch).map((f) => f.path)) : [];
  return { labels: [...new Set([...labels, ...fromPatch])], unmapped };
}

/** Whether each test passed, by the runner's log. */
function suitePassed(runnerName: TestSetup['runnerName'], output: string, tests: readonly string[]): Map<string, boolean> {
  if (runnerName === 'pytest') {
    const statuses = parsePytestSummary(output);
    return new Map(tests.map((t) => [t, pytestPassed(statuses.get(t))]));
  }
  const statuses = parseDjangoLog(output);
  return new Map(tests.map((t) => [t, djangoPassed(statuses.get(normalizeDjangoTestName(t)))]));
}

function statusesFrom(
  f2p: readonly string[],
  p2p: readonly string[],
  passed: ReadonlyMap<string, boolean>,
): Pick<TestRun, 'failToPass' | 'passToPass'> {
  return {
    failToPass: f2p.map((test) => ({ test, passed: passed.get(test) ?? false })),
    passToPass: p2p.map((test) => ({ test, passed: passed.get(test) ?? false })),
  };
}
