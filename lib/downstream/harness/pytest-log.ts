/**
 * Per-test statuses from pytest's short test summary (`-rA`): lines such as
 *
 *     PASSED tests/test_calc.py::test_add
 *     FAILED tests/test_calc.py::test_sub - assert -1 == 5
 *     ERROR tests/test_calc.py::test_fixture - fixture 'db' not found
 *     XFAIL tests/test_calc.py::test_known - reason
 *
 * keyed by node id (the form SWE-bench's FAIL_TO_PASS / PASS_TO_PASS lists use). SKIPPED lines name a file
 * and line, not a node id, so they match nothing: a skipped test is not a passing one.
 */
export type PytestStatus = 'PASSED' | 'FAILED' | 'ERROR' | 'XFAIL' | 'XPASS' | 'SKIPPED';

const SUMMARY_LINE = /^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (.+)$/;

export function parsePytestSummary(output: string): Map<string, PytestStatus> {
  const statuses = new Map<string, PytestStatus>();
  for (const rawLine of output.split('\n')) {
    const line = rawLine.replace(/\r$/, '');
    const match = SUMMARY_LINE.exec(line);
    if (!match) continue;
    const status = match[1] as PytestStatus;
    let rest = match[2]!;
    // "FAILED id - message": the message follows the first " - " after the id. Parametrised ids may hold
    // " - " inside their brackets, so only a separator outside brackets counts.
    let depth = 0;
    for (let i = 0; i < rest.length; i++) {
      const ch = rest[i];
      if (ch === '[') depth++;
      else if (ch === ']') depth = Math.max(0, depth - 1);
      else if (depth === 0 && rest.startsWith(' - ', i)) {
        rest = rest.slice(0, i);
        break;
      }
    }
    statuses.set(rest.trim(), status);
  }
  return statuses;
}

/** SWE-bench's grading: a test counts as passing when pytest reports it PASSED or XFAIL. */
export function pytestPassed(status: PytestStatus | undefined): boolean {
  return status === 'PASSED' || status === 'XFAIL';
}
