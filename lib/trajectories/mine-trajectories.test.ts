import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { readRows } from '../artifacts/read-rows';
import { MinedCandidateSchema, type MinedCandidate, type MiningSummary } from '../../schemas/mining';
import type { RowRecord } from '../../schemas/rows';
import { countTokens } from '../tokenizer/qwen3';
import { MIN_REASONING_TOKENS } from './catm-parameters';
import { mineTrajectories, type MineOptions } from './mine-trajectories';

const SAMPLE = path.resolve(__dirname, '../../../shared/data/openhands_trajectories.sample.jsonl');

async function* fromArray(records: RowRecord[]): AsyncGenerator<RowRecord> {
  yield* records;
}

async function mine(
  records: AsyncIterable<RowRecord>,
  opts?: MineOptions,
): Promise<{ candidates: MinedCandidate[]; summary: MiningSummary }> {
  const run = mineTrajectories(records, opts);
  const candidates: MinedCandidate[] = [];
  for await (const c of run.candidates) candidates.push(c);
  return { candidates, summary: run.summary() };
}

type SampleRow = { trajectory_id: string; instance_id: string; repo: string; trajectory: Array<Record<string, unknown>> };
const sampleRows = (): SampleRow[] =>
  readFileSync(SAMPLE, 'utf8')
    .split('\n')
    .filter((l) => l.length > 0)
    .map((l) => JSON.parse(l) as SampleRow);

const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

function expectCountsAddUp(s: MiningSummary): void {
  expect(s.trajectoriesMined + sum(s.rowsSkipped)).toBe(s.rowsRead);
  expect(s.viewsMined + sum(s.viewsSkipped)).toBe(s.viewCalls);
  expect(s.candidatesAfterTokenFilter + s.candidatesBelowTokenFilter).toBe(s.candidates);
}

/**
 * Expected candidates of three sample trajectories, read by hand from the messages (see the report's script):
 * [path, viewCount, firstTurnIndex, postReasoningTurnIndex, start of the post-reasoning, its length in chars].
 * Where a file was viewed several times the kept turn is the one with most Qwen3 tokens (reference tokenizer:
 * pylint config/__init__.py 55 vs 62 → 80; boundfield.py 93 vs 75 → 24; base.py 13/16/12 → 86).
 */
type Expected = [string, number, number, number, string, number];
const HAND_READ: Record<string, { ordinal: number; candidates: Expected[]; skipped: Partial<MiningSummary['viewsSkipped']> }> = {
  // Views at 14 (/workspace/reproduce.py → outside) and 52 (doc/faq.rst → documentation) are skipped.
  'oh-claude35-pylint-dev__pylint-4661': {
    ordinal: 44,
    skipped: { outsideRepo: 1, documentation: 1 },
    candidates: [
      [
        'pylint/config/__init__.py',
        2,
        24,
        80,
        'Looking at the code, we already have the XDG Base Directory implementation in place (lines 64-66)',
        283,
      ],
      ['tests/lint/unittest_lint.py', 3, 42, 94, "I see the issue now. The test is passing but the actual behavior isn't working", 227],
      ['tests/unittest_config.py', 1, 82, 84, "Let's check the pylint/lint/pylinter.py file since it's one of the core files:", 78],
      ['pylint/lint/pylinter.py', 1, 84, 86, "Let's search specifically for PYLINT_HOME or .pylint.d in the pylinter.py file:", 79],
    ],
  },
  // View 46 answered "ERROR: Invalid `view_range`" (skipped; its retry at 48 counts); 60 is /workspace/reproduce_issue.py.
  'oh-claude35-django__django-14534': {
    ordinal: 6,
    skipped: { errorObservation: 1, outsideRepo: 1 },
    candidates: [
      [
        'django/forms/boundfield.py',
        2,
        22,
        24,
        'Now I can see the issue. In the `BoundWidget` class, the `id_for_label` property (line 279-280)',
        321,
      ],
      [
        'django/forms/widgets.py',
        3,
        30,
        42,
        'Now I understand the issue better. The problem is in the inheritance chain and how IDs are handled:',
        535,
      ],
    ],
  },
  // 60 is /workspace/reproduce.py; the last message (100) views subqueries.py and the trajectory ends.
  'oh-claude35-django__django-14007': {
    ordinal: 13,
    skipped: { outsideRepo: 1, noFollowingAssistant: 1 },
    candidates: [
      ['django/db/models/fields/__init__.py', 2, 28, 30, "Let's search for the relevant methods related to database value conversion:", 75],
      ['django/db/models/sql/compiler.py', 2, 40, 42, "Let's search specifically for the execute_sql method in the compiler", 99],
      ['django/db/models/base.py', 3, 50, 86, "Let's check the SQL compiler's `execute_sql` method for insert operations:", 74],
      ['tests/from_db_value/models.py', 1, 70, 72, "Let's also check if there are any tests for this model:", 55],
      ['tests/from_db_value/tests.py', 1, 72, 74, "The existing tests don't cover our specific case of returning fields", 124],
      ['django/db/models/query.py', 2, 88, 90, "Let's check the `fetch_returned_insert_columns` method in the database operations:", 82],
      [
        'django/db/backends/base/operations.py',
        2,
        90,
        96,
        'Looking at the code, I see that we need to modify how Django processes returned values',
        149,
      ],
      [
        'django/db/backends/sqlite3/operations.py',
        1,
        92,
        94,
        'After reviewing the code, I see that the issue is in how Django handles returned values from inserts.',
        330,
      ],
    ],
  },
};

describe('mineTrajectories on the real OpenHands sample', () => {
  it('mines exactly the hand-read (path, post-reasoning) pairs of three trajectories', async () => {
    const rows = sampleRows();
    for (const [trajectoryId, expected] of Object.entries(HAND_READ)) {
      const index = rows.findIndex((r) => r.trajectory_id === trajectoryId);
      expect(index + 1).toBe(expected.ordinal);
      const { candidates, summary } = await mine(fromArray([{ ordinal: expected.ordinal, row: rows[index] }]), { minReasoningTokens: 0 });
      const actual: Expected[] = candidates.map((c) => [
        c.path,
        c.viewCount,
        c.firstTurnIndex,
        c.postReasoningTurnIndex,
        c.postReasoning.slice(0, expected.candidates.find((e) => e[0] === c.path)?.[4].length ?? 40),
        c.postReasoning.length,
      ]);
      expect({ trajectoryId, candidates: actual }).toEqual({ trajectoryId, candidates: expected.candidates });
      for (const c of candidates) {
        expect(MinedCandidateSchema.parse(c)).toEqual(c);
        expect(c).toMatchObject({ trajectoryId, instanceId: rows[index]!.instance_id, repo: rows[index]!.repo });
        expect(c.postReasoning).toBe(rows[index]!.trajectory[c.postReasoningTurnIndex]!.content);
        expect(c.postReasoningTokens).toBe(countTokens(c.postReasoning));
      }
      expect(Object.fromEntries(Object.entries(summary.viewsSkipped).filter(([, n]) => n > 0))).toEqual(expected.skipped);
    }
  });

  it('keeps only candidates with at least 30 reasoning tokens by default (Table 5) and counts the others', async () => {
    const rows = sampleRows();
    const three = Object.values(HAND_READ).map(({ ordinal }) => ({ ordinal, row: rows[ordinal - 1] }));
    const { candidates, summary } = await mine(fromArray(three));
    expect(MIN_REASONING_TOKENS).toBe(30);
    // Token counts of the 14 hand-read candidates: pylint 62, 47, 21, 21; django-14534 93, 126;
    // django-14007 13, 17, 16, 13, 25, 17, 33, 69.
    expect(candidates.map((c) => [c.trajectoryId.replace('oh-claude35-', ''), c.path, c.postReasoningTokens])).toEqual([
      ['pylint-dev__pylint-4661', 'pylint/config/__init__.py', 62],
      ['pylint-dev__pylint-4661', 'tests/lint/unittest_lint.py', 47],
      ['django__django-14534', 'django/forms/boundfield.py', 93],
      ['django__django-14534', 'django/forms/widgets.py', 126],
      ['django__django-14007', 'django/db/backends/base/operations.py', 33],
      ['django__django-14007', 'django/db/backends/sqlite3/operations.py', 69],
    ]);
    expect(summary).toMatchObject({ candidates: 14, candidatesBelowTokenFilter: 8, candidatesAfterTokenFilter: 6, minReasoningTokens: 30 });
  });

  it('gives whole-file totals that add up: 48 rows, 280 view calls, every skip by reason', async () => {
    const progress: number[] = [];
    const { candidates, summary } = await mine(readRows(SAMPLE), { onProgress: (p) => progress.push(p.rowsRead) });
    expect(summary).toMatchObject({
      rowsRead: 48,
      trajectoriesMined: 48,
      viewCalls: 280,
      viewsMined: 270,
      candidates: 116,
      candidatesBelowTokenFilter: 42,
      candidatesAfterTokenFilter: 74,
    });
    expect(summary.rowsSkipped).toEqual({
      malformedRow: 0,
      'missingOrInvalid:trajectory_id': 0,
      'missingOrInvalid:instance_id': 0,
      'missingOrInvalid:repo': 0,
      'missingOrInvalid:trajectory': 0,
    });
    expect(summary.viewsSkipped).toEqual({
      nonJsonArguments: 0,
      missingPath: 0,
      outsideRepo: 5, // reproduce.py ×3, reproduce_issue.py, test_sympy/… (a copy outside the checkout)
      repoMismatch: 0,
      directory: 0,
      documentation: 1, // doc/faq.rst
      extensionless: 0,
      errorObservation: 1, // invalid view_range
      noFollowingAssistant: 3, // three trajectories end on a view
    });
    expectCountsAddUp(summary);
    expect(candidates).toHaveLength(74);
    expect(new Set(candidates.map((c) => `${c.trajectoryId}\0${c.path}`)).size).toBe(74);
    expect(candidates.every((c) => c.postReasoningTokens >= 30 && c.path.endsWith('.py'))).toBe(true);
    expect(progress).toEqual(Array.from({ length: 48 }, (_, i) => i + 1));
  });

  it("streams: the first trajectory's candidates come out before the second row is read", async () => {
    const rows = sampleRows();
    let pulled = 0;
    async function* source(): AsyncGenerator<RowRecord> {
      for (let i = 0; i < rows.length; i++) {
        pulled++;
        yield { ordinal: i + 1, row: rows[i] };
      }
    }
    const run = mineTrajectories(source());
    const first = await run.candidates.next();
    expect(first.done).toBe(false);
    expect((first.value as MinedCandidate).trajectoryId).toBe(rows[0]!.trajectory_id);
    expect(pulled).toBe(1);
    await run.candidates.return();
  });
});

/** A real row, deep-copied so that a test can break it. */
function realRow(trajectoryId = 'oh-claude35-django__django-14534'): SampleRow {
  const row = sampleRows().find((r) => r.trajectory_id === trajectoryId);
  return structuredClone(row!);
}

function editorCallsIn(row: SampleRow): Array<{ turn: number; fn: { name: string; arguments: string } }> {
  return row.trajectory.flatMap((m, turn) =>
    ((m.tool_calls as Array<{ function: { name: string; arguments: string } }> | undefined) ?? [])
      .filter((c) => c.function.name === 'str_replace_editor')
      .map((c) => ({ turn, fn: c.function })),
  );
}

describe('mineTrajectories on bad input', () => {
  it('counts a malformed JSON row, a truncated last line, a row without trajectory and a non-object row; mines the rest', async () => {
    const good = realRow();
    const lines = [
      JSON.stringify(good),
      '{"trajectory_id": "x", "instance_id": ',
      JSON.stringify({ ...good, trajectory_id: 'no-trajectory', trajectory: undefined }),
      JSON.stringify({ ...good, trajectory_id: 'bad-trajectory', trajectory: 'not json' }),
      JSON.stringify({ ...good, trajectory_id: 'bad-repo', repo: 'django' }),
      JSON.stringify({ ...good, instance_id: 42 }),
      JSON.stringify({ ...good, trajectory_id: '' }),
      '[1, 2, 3]',
      JSON.stringify(good).slice(0, 5000), // truncated last line, no newline
    ];
    const file = path.join(mkdtempSync(path.join(tmpdir(), 'mine-bad-')), 'bad.jsonl');
    writeFileSync(file, lines.join('\n'));

    const { candidates, summary } = await mine(readRows(file));
    expect(summary.rowsRead).toBe(9);
    expect(summary.trajectoriesMined).toBe(1);
    expect(summary.rowsSkipped).toEqual({
      malformedRow: 3, // line 2, the array on line 8, the truncated line 9
      'missingOrInvalid:trajectory_id': 1,
      'missingOrInvalid:instance_id': 1,
      'missingOrInvalid:repo': 1,
      'missingOrInvalid:trajectory': 2,
    });
    expectCountsAddUp(summary);
    expect(candidates.map((c) => c.path)).toEqual(['django/forms/boundfield.py', 'django/forms/widgets.py']);
    const rowExamples = summary.examples.filter((e) => e.reason === 'malformedRow' || e.reason.startsWith('missingOrInvalid'));
    expect(rowExamples.map((e) => [e.ordinal, e.reason])).toEqual([
      [2, 'malformedRow'],
      [3, 'missingOrInvalid:trajectory'],
      [4, 'missingOrInvalid:trajectory'],
      [5, 'missingOrInvalid:repo'],
      [6, 'missingOrInvalid:instance_id'],
      [7, 'missingOrInvalid:trajectory_id'],
      [8, 'malformedRow'],
      [9, 'malformedRow'],
    ]);
    expect(rowExamples[1]!.detail).toContain('column trajectory');
  });

  it('counts each bad view by reason and keeps the good ones of the same trajectory', async () => {
    const row = realRow('oh-claude35-django__django-14007');
    const calls = editorCallsIn(row).filter((c) => JSON.parse(c.fn.arguments).command === 'view');
    const prefix = '/workspace/django__django__4.0';
    const setPath = (i: number, p: string) => (calls[i]!.fn.arguments = JSON.stringify({ command: 'view', path: p }));
    calls[0]!.fn.arguments = '{"command": "view", "path": "/workspace/django__django__4.0/dj'; // truncated JSON
    calls[1]!.fn.arguments = '"view"'; // JSON, but not an object
    setPath(2, '/etc/passwd.py');
    setPath(3, '/workspace/sympy__sympy__1.6/sympy/core/basic.py');
    setPath(4, `${prefix}/django/db/`);
    setPath(5, `${prefix}/README.rst`);
    setPath(6, `${prefix}/Makefile`);
    calls[7]!.fn.arguments = JSON.stringify({ command: 'view' });
    // An edit call with broken JSON that never mentions "view" cannot have been a view: not counted at all.
    const edit = editorCallsIn(row).find((c) => !c.fn.arguments.includes('"view"'))!;
    edit.fn.arguments = edit.fn.arguments.slice(0, 30);
    row.trajectory.splice(3, 0, null as unknown as Record<string, unknown>); // a message that is not one
    const { candidates, summary } = await mine(fromArray([{ ordinal: 1, row }]), { minReasoningTokens: 0 });
    expect(summary.viewsSkipped).toEqual({
      nonJsonArguments: 2,
      missingPath: 1,
      outsideRepo: 1, // /etc/passwd.py (the original /workspace/reproduce.py view at 60 became the directory)
      repoMismatch: 1,
      directory: 1,
      documentation: 1,
      extensionless: 1,
      errorObservation: 0,
      noFollowingAssistant: 1,
    });
    expect(summary.messagesSkipped).toEqual({ malformedMessage: 1, malformedToolCall: 0 });
    expect(summary.viewCalls).toBe(16);
    expectCountsAddUp(summary);
    expect(candidates.length).toBeGreaterThan(0);
    expect(summary.examples.find((e) => e.reason === 'nonJsonArguments')?.detail).toMatch(/^message \d+: arguments are not JSON/);
  });

  it('gives every file viewed in one turn the same following reasoning (one-to-many, Table 4)', async () => {
    const row = realRow('oh-claude35-django__django-14534');
    const prefix = '/workspace/django__django__4.0';
    const viewCall = (id: string, p: string) => ({
      id,
      type: 'function',
      function: { name: 'str_replace_editor', arguments: JSON.stringify({ command: 'view', path: `${prefix}/${p}` }) },
    });
    const reasoning = row.trajectory[42]!.content as string; // a real 535-character analysis
    row.trajectory = [
      ...row.trajectory.slice(0, 2),
      {
        role: 'assistant',
        content: 'Let me look at the three files at once.',
        tool_calls: [
          viewCall('a', 'django/forms/boundfield.py'),
          viewCall('b', 'django/forms/widgets.py'),
          viewCall('c', 'django/forms/boundfield.py'),
        ],
      },
      { role: 'tool', tool_call_id: 'a', name: 'str_replace_editor', content: "Here's the result of running `cat -n` on …" },
      { role: 'tool', tool_call_id: 'b', name: 'str_replace_editor', content: "Here's the result of running `cat -n` on …" },
      { role: 'tool', tool_call_id: 'c', name: 'str_replace_editor', content: "Here's the result of running `cat -n` on …" },
      { role: 'assistant', content: reasoning, tool_calls: [] },
    ];
    const { candidates, summary } = await mine(fromArray([{ ordinal: 1, row }]));
    expect(candidates.map((c) => [c.path, c.viewCount, c.firstTurnIndex, c.postReasoningTurnIndex, c.postReasoning])).toEqual([
      ['django/forms/boundfield.py', 2, 2, 6, reasoning],
      ['django/forms/widgets.py', 1, 2, 6, reasoning],
    ]);
    expect(summary).toMatchObject({ viewCalls: 3, viewsMined: 3, candidates: 2 });
  });

  it('reads content given as an array of text parts and arguments given as an object', async () => {
    const row = realRow('oh-claude35-django__django-14534');
    const assistantAt22 = row.trajectory[22] as { tool_calls: Array<{ function: { arguments: unknown } }> };
    assistantAt22.tool_calls[0]!.function.arguments = JSON.parse(assistantAt22.tool_calls[0]!.function.arguments as string);
    const text = row.trajectory[24]!.content as string;
    row.trajectory[24]!.content = [
      { type: 'text', text: text.slice(0, 100) },
      { type: 'text', text: text.slice(100) },
    ];
    const { candidates } = await mine(fromArray([{ ordinal: 1, row }]));
    expect(candidates[0]).toMatchObject({ path: 'django/forms/boundfield.py', postReasoning: text, postReasoningTurnIndex: 24 });
  });

  it("detects a directory from the editor's listing and refuses a negative token threshold", async () => {
    const row = realRow('oh-claude35-django__django-14534');
    const toolAnswer = row.trajectory.find(
      (m) => m.role === 'tool' && m.tool_call_id === (row.trajectory[30] as { tool_calls: Array<{ id: string }> }).tool_calls[0]!.id,
    )!;
    toolAnswer.content =
      "Here's the files and directories up to 2 levels deep in /workspace/django__django__4.0/django/forms/widgets.py, excluding hidden items:";
    const { summary } = await mine(fromArray([{ ordinal: 1, row }]));
    expect(summary.viewsSkipped.directory).toBe(1);
    expect(() => mineTrajectories(fromArray([]), { minReasoningTokens: -1 })).toThrow(/minReasoningTokens/);
  });
});
