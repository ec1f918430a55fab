/**
 * Django's own test runner (`tests/runtests.py --verbosity 2`), as SWE-bench runs the django instances. Test
 * names there look like `test_foo (app.tests.FooTests)` (Django < 4.1) or `test_foo (app.tests.FooTests.test_foo)`
 * (newer), and a test with a docstring is reported under its docstring's first line on the following line:
 *
 *     test_foo (app.tests.FooTests) ... ok
 *     test_bar (app.tests.FooTests)
 *     Bar does the thing. ... FAIL
 *
 * Keys are normalised to `name (dotted.Class)` so both runner generations match either spelling.
 */
export type DjangoStatus = 'ok' | 'FAIL' | 'ERROR' | 'skipped' | 'expected failure' | 'unexpected success';

const TEST_HEAD = /^(\w+) \(([\w.]+)\)/;
const RESULT = / \.\.\. (ok|FAIL|ERROR|skipped.*|expected failure|unexpected success)$/;

/** `test_foo (a.b.C.test_foo)` → `test_foo (a.b.C)`; other strings are returned trimmed. */
export function normalizeDjangoTestName(name: string): string {
  const match = /^(\w+) \(([\w.]+)\)$/.exec(name.trim());
  if (!match) return name.trim();
  const [, method, cls] = match as unknown as [string, string, string];
  return `${method} (${cls.endsWith(`.${method}`) ? cls.slice(0, -method.length - 1) : cls})`;
}

export function parseDjangoLog(output: string): Map<string, DjangoStatus> {
  const statuses = new Map<string, DjangoStatus>();
  let pending: string | null = null;
  for (const rawLine of output.split('\n')) {
    const line = rawLine.replace(/\r$/, '');
    const result = RESULT.exec(line);
    const head = TEST_HEAD.exec(line);
    if (result) {
      const status = (result[1]!.startsWith('skipped') ? 'skipped' : result[1]) as DjangoStatus;
      const subject = line.slice(0, result.index);
      if (head) statuses.set(normalizeDjangoTestName(`${head[1]} (${head[2]})`), status);
      else if (pending) {
        // The docstring line: the test is known by both its name and its docstring.
        statuses.set(pending, status);
        statuses.set(subject.trim(), status);
      }
      pending = null;
    } else if (head && line.trim() === head[0]) {
      pending = normalizeDjangoTestName(head[0]);
    } else {
      pending = null;
    }
  }
  return statuses;
}

/** SWE-bench's grading: passing means `ok` or `expected failure`. */
export function djangoPassed(status: DjangoStatus | undefined): boolean {
  return status === 'ok' || status === 'expected failure';
}

/**
 * runtests.py labels for a set of test names: `test_foo (app.tests.FooTests)` → `app.tests.FooTests` (the
 * class, so one run covers its tests). Names that are not in that form (docstring names) yield nothing;
 * the caller falls back to the test modules of the instance's test patch.
 */
export function djangoLabelsForTests(names: readonly string[]): { labels: string[]; unmapped: string[] } {
  const labels = new Set<string>();
  const unmapped: string[] = [];
  for (const name of names) {
    const match = /^(\w+) \(([\w.]+)\)$/.exec(normalizeDjangoTestName(name));
    if (match) labels.add(match[2]!);
    else unmapped.push(name);
  }
  return { labels: [...labels].sort(), unmapped };
}

/** SWE-bench's django test directives: `tests/app/test_x.py` → `app.test_x` for each .py file under tests/. */
export function djangoLabelsForFiles(files: readonly string[]): string[] {
  return [
    ...new Set(
      files
        .filter((f) => f.startsWith('tests/') && f.endsWith('.py'))
        .map((f) => f.slice('tests/'.length, -'.py'.length).replaceAll('/', '.')),
    ),
  ].sort();
}
