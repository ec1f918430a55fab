import { describe, expect, it } from 'vitest';
import { djangoLabelsForFiles, djangoLabelsForTests, djangoPassed, normalizeDjangoTestName, parseDjangoLog } from './django-log';
import { parsePytestSummary, pytestPassed } from './pytest-log';

describe('pytest -rA summary', () => {
  it('reads statuses by node id, including parametrised ids with spaces and " - "', () => {
    const output = [
      '============================= test session starts ==============================',
      'tests/test_calc.py .F.x                                                    [100%]',
      '=========================== short test summary info ============================',
      'PASSED tests/test_calc.py::test_add',
      'PASSED tests/test_calc.py::test_param[a b - c]',
      'FAILED tests/test_calc.py::test_sub - assert -1 == 5',
      "ERROR tests/test_calc.py::test_db - fixture 'db' not found",
      'XFAIL tests/test_calc.py::test_known - reason: bug 12',
      'XPASS tests/test_calc.py::test_lucky',
      'SKIPPED [1] tests/test_calc.py:40: needs network',
      '==================== 1 failed, 2 passed, 1 xfailed in 0.05s ====================',
    ].join('\n');
    const statuses = parsePytestSummary(output);
    expect(Object.fromEntries(statuses)).toEqual({
      'tests/test_calc.py::test_add': 'PASSED',
      'tests/test_calc.py::test_param[a b - c]': 'PASSED',
      'tests/test_calc.py::test_sub': 'FAILED',
      'tests/test_calc.py::test_db': 'ERROR',
      'tests/test_calc.py::test_known': 'XFAIL',
      'tests/test_calc.py::test_lucky': 'XPASS',
      '[1] tests/test_calc.py:40: needs network': 'SKIPPED',
    });
    expect(['PASSED', 'XFAIL', 'XPASS', 'FAILED', 'ERROR', 'SKIPPED', undefined].map((s) => pytestPassed(s as never))).toEqual([
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('django runtests.py --verbosity 2', () => {
  const output = [
    "Testing against Django installed in '/testbed/django'",
    'test_ok (migrations.test_state.StateTests) ... ok',
    'test_new_style (migrations.test_state.StateTests.test_new_style) ... FAIL',
    'test_docstring (migrations.test_state.StateTests)',
    'A OneToOneField is unique. ... ok',
    "test_skip (migrations.test_state.StateTests) ... skipped 'no sqlite'",
    'test_xfail (migrations.test_state.StateTests) ... expected failure',
    'test_err (migrations.test_state.StateTests) ... ERROR',
    '----------------------------------------------------------------------',
    'Ran 6 tests in 0.012s',
  ].join('\n');

  it('reads statuses under normalised names and docstrings', () => {
    const statuses = parseDjangoLog(output);
    expect(Object.fromEntries(statuses)).toEqual({
      'test_ok (migrations.test_state.StateTests)': 'ok',
      'test_new_style (migrations.test_state.StateTests)': 'FAIL',
      'test_docstring (migrations.test_state.StateTests)': 'ok',
      'A OneToOneField is unique.': 'ok',
      'test_skip (migrations.test_state.StateTests)': 'skipped',
      'test_xfail (migrations.test_state.StateTests)': 'expected failure',
      'test_err (migrations.test_state.StateTests)': 'ERROR',
    });
    expect(djangoPassed(statuses.get(normalizeDjangoTestName('test_ok (migrations.test_state.StateTests.test_ok)')))).toBe(true);
    expect(djangoPassed(statuses.get('test_xfail (migrations.test_state.StateTests)'))).toBe(true);
    expect(djangoPassed(statuses.get('test_skip (migrations.test_state.StateTests)'))).toBe(false);
  });

  it('derives runtests.py labels from test names, or from the test patch files', () => {
    expect(
      djangoLabelsForTests(['test_a (app.tests.T)', 'test_b (app.tests.T.test_b)', 'test_c (other.tests.U)', 'Docstring name.']),
    ).toEqual({
      labels: ['app.tests.T', 'other.tests.U'],
      unmapped: ['Docstring name.'],
    });
    expect(
      djangoLabelsForFiles(['tests/migrations/test_state.py', 'django/db/models.py', 'tests/README.rst', 'tests/migrations/test_state.py']),
    ).toEqual(['migrations.test_state']);
  });
});
