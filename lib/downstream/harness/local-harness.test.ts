import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalHarness, type LocalHarnessOptions } from './local-harness';
import { leftoverRuns, makeDownstreamFixture, makeInstance, type DownstreamFixture } from '../../../test/fixtures/downstream/fixture';

let fixture: DownstreamFixture;

beforeAll(async () => {
  fixture = await makeDownstreamFixture();
});
afterAll(async () => {
  await fixture.cleanup();
});

function harness(overrides: Partial<LocalHarnessOptions> = {}) {
  return createLocalHarness({
    worktrees: fixture.worktrees,
    interpreter: fixture.python,
    testRunner: 'pytest',
    timeoutMs: 60_000,
    ...overrides,
  });
}

describe('local harness (pytest)', () => {
  it('resolves with the gold patch: the failing test passes, the passing one still does', async () => {
    const result = await harness().evaluate(fixture.instance, fixture.goldPatch);
    expect(result.outcome).toBe('resolved');
    expect(result.resolved).toBe(true);
    expect(result.failToPass).toEqual([{ test: 'tests/test_ops.py::test_add', passed: true }]);
    expect(result.passToPass).toEqual([{ test: 'tests/test_ops.py::test_mul', passed: true }]);
    expect(result.log).toContain('PASSED tests/test_ops.py::test_add');
    expect(await leftoverRuns(fixture)).toEqual([]);
  });

  it('says unresolved for a patch that applies but does not fix the bug', async () => {
    const cosmetic = fixture.goldPatch.replace('+    return a + b', '+    return a - b  # looked at it');
    const result = await harness().evaluate(fixture.instance, cosmetic);
    expect(result).toMatchObject({ outcome: 'unresolved', resolved: false });
    expect(result.failToPass).toEqual([{ test: 'tests/test_ops.py::test_add', passed: false }]);
    expect(result.passToPass).toEqual([{ test: 'tests/test_ops.py::test_mul', passed: true }]);
    expect(result.log).toContain('FAILED tests/test_ops.py::test_add');
  });

  it('says unresolved for an empty patch without running anything', async () => {
    const result = await harness().evaluate(fixture.instance, '  \n');
    expect(result).toMatchObject({ outcome: 'unresolved', resolved: false, failToPass: [], passToPass: [] });
    expect(result.log).toMatch(/empty patch/);
  });

  it('reports a patch that does not apply as patch_failed', async () => {
    const stale = fixture.goldPatch.replace('-    return a - b', '-    return a - b - 0');
    const result = await harness().evaluate(fixture.instance, stale);
    expect(result).toMatchObject({ outcome: 'patch_failed', resolved: false, failToPass: [], passToPass: [] });
    expect(result.log).toMatch(/patch does not apply|patch failed/);
    expect(await leftoverRuns(fixture)).toEqual([]);
  });

  // The limit leaves pytest time to start on a loaded machine: the test must reach its sleep to be killed.
  it('kills a hanging test run after the timeout (the whole process group) and says timeout', async () => {
    const pidFile = path.join(fixture.parent, 'hang.pid');
    const hanging = makeInstance({ ...fixture.instance, FAIL_TO_PASS: ['tests/test_slow.py::test_hang'], PASS_TO_PASS: [] });
    const started = performance.now();
    const result = await harness({ timeoutMs: 6_000, env: { HANG_PID_FILE: pidFile } }).evaluate(hanging, fixture.goldPatch);
    const elapsed = performance.now() - started;
    expect(result).toMatchObject({ outcome: 'timeout', resolved: false });
    expect(result.failToPass).toEqual([{ test: 'tests/test_slow.py::test_hang', passed: false }]);
    expect(result.log).toMatch(/timed out after 6000 ms/);
    expect(elapsed).toBeGreaterThanOrEqual(6_000);
    expect(elapsed).toBeLessThan(20_000);
    // The test process itself (a grandchild of whatever started it) is gone.
    const pid = Number(await fs.readFile(pidFile, 'utf8'));
    expect(pid).toBeGreaterThan(0);
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
  });

  it('says error, naming the interpreter, when it does not exist (path or PATH name)', async () => {
    for (const interpreter of [path.join(fixture.parent, 'no-such-python'), 'python-does-not-exist-3.99']) {
      const result = await harness({ interpreter }).evaluate(fixture.instance, fixture.goldPatch);
      expect(result).toMatchObject({ outcome: 'error', resolved: false });
      expect(result.log).toContain(`interpreter ${JSON.stringify(interpreter)} not found`);
    }
  });

  it('says error for an instance without tests, and for a checkout that cannot be made', async () => {
    const noTests = makeInstance({ ...fixture.instance, FAIL_TO_PASS: [], PASS_TO_PASS: [] });
    expect(await harness().evaluate(noTests, fixture.goldPatch)).toMatchObject({
      outcome: 'error',
      log: expect.stringMatching(/no FAIL_TO_PASS or PASS_TO_PASS/),
    });
    const unknownCommit = makeInstance({ ...fixture.instance, base_commit: 'f'.repeat(40) });
    const result = await harness().evaluate(unknownCommit, fixture.goldPatch);
    expect(result.outcome).toBe('error');
    expect(result.log).toMatch(/could not make a checkout of acme\/calc@f{40}/);
  });

  it('applies the test patch after resetting the test files the model touched', async () => {
    const withTestPatch = makeInstance({
      ...fixture.instance,
      test_patch: fixture.testPatch,
      FAIL_TO_PASS: ['tests/test_new.py::test_add_negative', 'tests/test_ops.py::test_add_zero', 'tests/test_ops.py::test_add'],
    });
    const resolved = await harness().evaluate(withTestPatch, fixture.goldPatch);
    expect(resolved.outcome).toBe('resolved');
    expect(resolved.failToPass.every((t) => t.passed)).toBe(true);

    // A "fix" that rewrites the tests and pre-creates the new test file: both are reset before the test
    // patch goes in, so the bug is still caught.
    const cheat = [
      'diff --git a/tests/test_ops.py b/tests/test_ops.py',
      '--- a/tests/test_ops.py',
      '+++ b/tests/test_ops.py',
      '@@ -2,7 +2,7 @@ from calc.ops import add, mul',
      ' ',
      ' ',
      ' def test_add():',
      '-    assert add(2, 3) == 5',
      '+    assert add(2, 3) == -1',
      ' ',
      ' ',
      ' def test_mul():',
      'diff --git a/tests/test_new.py b/tests/test_new.py',
      'new file mode 100644',
      '--- /dev/null',
      '+++ b/tests/test_new.py',
      '@@ -0,0 +1,2 @@',
      '+def test_add_negative():',
      '+    pass',
      '',
    ].join('\n');
    const caught = await harness().evaluate(withTestPatch, cheat);
    expect(caught.log).toContain('resetting 2 test file(s)');
    expect(caught.outcome).toBe('unresolved');
    expect(caught.failToPass).toEqual([
      { test: 'tests/test_new.py::test_add_negative', passed: false },
      { test: 'tests/test_ops.py::test_add_zero', passed: false },
      { test: 'tests/test_ops.py::test_add', passed: false },
    ]);
    expect(caught.passToPass).toEqual([{ test: 'tests/test_ops.py::test_mul', passed: true }]);

    const conflicting = makeInstance({
      ...withTestPatch,
      test_patch: fixture.testPatch
        .replace('def test_add_zero', 'def test_add_zero_renamed')
        .replace(' def test_mul():', ' def test_mul_gone():'),
    });
    const broken = await harness().evaluate(conflicting, fixture.goldPatch);
    expect(broken.outcome).toBe('error');
    expect(broken.log).toMatch(/test_patch does not apply/);
  });

  it('runs a custom per-test command, each placeholder one argument, exit code 0 = passed', async () => {
    const custom = harness({ testRunner: { argv: ['{interpreter}', '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '{test}'] } });
    const cosmetic = fixture.goldPatch.replace('+    return a + b', '+    return a - b  # looked at it');
    const result = await custom.evaluate(fixture.instance, cosmetic);
    expect(result).toMatchObject({
      outcome: 'unresolved',
      failToPass: [{ test: 'tests/test_ops.py::test_add', passed: false }],
      passToPass: [{ test: 'tests/test_ops.py::test_mul', passed: true }],
    });
    expect(result.log).toContain(
      JSON.stringify([fixture.python, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'tests/test_ops.py::test_add']),
    );
  });

  it('refuses bad configuration up front', () => {
    expect(() => harness({ timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => harness({ testRunner: { argv: ['{interpreter}', 'run.py'] } })).toThrow(/must contain \{test\}/);
    expect(() => harness({ testRunner: { argv: '{interpreter} {tests}' } })).toThrow(/unknown placeholder \{tests\}/);
  });
});
