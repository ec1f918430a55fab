import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { goldFilesFromPatch, parseUnifiedDiff, PatchParseError, type FilePatch } from './parse-diff';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const verified = new Map<string, { repo: string; patch: string }>(
  readFileSync(path.resolve(repoRoot, '../shared/data/swebench_verified.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { instance_id: string; repo: string; patch: string })
    .map((row) => [row.instance_id, row]),
);
const goldPatch = (id: string) => {
  const row = verified.get(id);
  if (!row) throw new Error(`${id} is not in swebench_verified.jsonl`);
  return row.patch;
};

/** What each file of a parsed patch says, compactly. */
const summary = (files: FilePatch[]) =>
  files.map((f) => ({ path: f.path, status: f.status, hunks: f.hunkRanges, changed: f.preImageChangedRanges }));

/**
 * Expected values read off each gold patch by hand: hunk range = [oldStart, oldStart + oldLines - 1];
 * changed = the `-` lines, or for a pure insertion the pre-image line it follows (git's anchor).
 */
const REAL_CASES: { id: string; repo: string; files: ReturnType<typeof summary> }[] = [
  {
    id: 'astropy__astropy-12907',
    repo: 'astropy/astropy',
    files: [{ path: 'astropy/modeling/separable.py', status: 'modified', hunks: [[242, 248]], changed: [[245, 245]] }],
  },
  {
    id: 'astropy__astropy-13398',
    repo: 'astropy/astropy',
    files: [
      { path: 'astropy/coordinates/builtin_frames/__init__.py', status: 'modified', hunks: [[48, 53]], changed: [[50, 50]] },
      {
        path: 'astropy/coordinates/builtin_frames/intermediate_rotation_transforms.py',
        status: 'modified',
        hunks: [
          [71, 77],
          [146, 154],
          [161, 169],
          [196, 204],
          [211, 219],
        ],
        changed: [
          [74, 74],
          [149, 149],
          [151, 151],
          [164, 164],
          [166, 166],
          [199, 199],
          [201, 201],
          [214, 214],
          [216, 216],
        ],
      },
      {
        path: 'astropy/coordinates/builtin_frames/itrs.py',
        status: 'modified',
        hunks: [[3, 28]],
        changed: [
          [6, 7],
          [10, 10],
          [12, 12],
          [17, 17],
          [19, 19],
          [25, 25],
        ],
      },
      { path: 'astropy/coordinates/builtin_frames/itrs_observed_transforms.py', status: 'added', hunks: [], changed: [] },
    ],
  },
  {
    id: 'django__django-16082',
    repo: 'django/django',
    files: [{ path: 'django/db/models/expressions.py', status: 'modified', hunks: [[533, 538]], changed: [[535, 535]] }],
  },
  {
    id: 'django__django-14315',
    repo: 'django/django',
    files: [
      { path: 'django/db/backends/base/client.py', status: 'modified', hunks: [[21, 26]], changed: [[24, 25]] },
      { path: 'django/db/backends/postgresql/client.py', status: 'modified', hunks: [[51, 57]], changed: [[54, 54]] },
    ],
  },
  {
    id: 'matplotlib__matplotlib-23314',
    repo: 'matplotlib/matplotlib',
    files: [{ path: 'lib/mpl_toolkits/mplot3d/axes3d.py', status: 'modified', hunks: [[387, 392]], changed: [[389, 389]] }],
  },
  {
    id: 'matplotlib__matplotlib-25479',
    repo: 'matplotlib/matplotlib',
    files: [
      { path: 'lib/matplotlib/cm.py', status: 'modified', hunks: [[146, 151]], changed: [[148, 148]] },
      { path: 'lib/matplotlib/colors.py', status: 'modified', hunks: [[774, 780]], changed: [[777, 777]] },
    ],
  },
  {
    id: 'mwaskom__seaborn-3187',
    repo: 'mwaskom/seaborn',
    files: [
      { path: 'seaborn/_core/scales.py', status: 'modified', hunks: [[378, 383]], changed: [[380, 380]] },
      { path: 'seaborn/utils.py', status: 'modified', hunks: [[699, 704]], changed: [[701, 701]] },
    ],
  },
  {
    id: 'pallets__flask-5014',
    repo: 'pallets/flask',
    files: [{ path: 'src/flask/blueprints.py', status: 'modified', hunks: [[190, 195]], changed: [[192, 192]] }],
  },
  {
    id: 'psf__requests-1921',
    repo: 'psf/requests',
    files: [{ path: 'requests/sessions.py', status: 'modified', hunks: [[59, 64]], changed: [[61, 61]] }],
  },
  {
    id: 'pydata__xarray-3677',
    repo: 'pydata/xarray',
    files: [{ path: 'xarray/core/dataset.py', status: 'modified', hunks: [[3604, 3609]], changed: [[3606, 3606]] }],
  },
  {
    id: 'pylint-dev__pylint-7080',
    repo: 'pylint-dev/pylint',
    files: [{ path: 'pylint/lint/expand_modules.py', status: 'modified', hunks: [[52, 57]], changed: [[54, 54]] }],
  },
  {
    id: 'pytest-dev__pytest-6202',
    repo: 'pytest-dev/pytest',
    files: [{ path: 'src/_pytest/python.py', status: 'modified', hunks: [[285, 292]], changed: [[288, 289]] }],
  },
  {
    id: 'scikit-learn__scikit-learn-14141',
    repo: 'scikit-learn/scikit-learn',
    files: [{ path: 'sklearn/utils/_show_versions.py', status: 'modified', hunks: [[48, 53]], changed: [[50, 50]] }],
  },
  {
    id: 'sphinx-doc__sphinx-8621',
    repo: 'sphinx-doc/sphinx',
    files: [{ path: 'sphinx/builders/html/transforms.py', status: 'modified', hunks: [[37, 43]], changed: [[40, 40]] }],
  },
  {
    id: 'sphinx-doc__sphinx-7462',
    repo: 'sphinx-doc/sphinx',
    // As the header states it; ground-truth.test.ts checks where it really applies (offset +9).
    files: [
      { path: 'sphinx/domains/python.py', status: 'modified', hunks: [[105, 115]], changed: [[108, 112]] },
      { path: 'sphinx/pycode/ast.py', status: 'modified', hunks: [[114, 120]], changed: [[117, 117]] },
    ],
  },
  {
    id: 'sympy__sympy-22914',
    repo: 'sympy/sympy',
    files: [{ path: 'sympy/printing/pycode.py', status: 'modified', hunks: [[18, 23]], changed: [[20, 20]] }],
  },
];

describe('parseUnifiedDiff on real SWE-bench Verified gold patches', () => {
  it('covers all 12 repositories of the data set', () => {
    const all = new Set([...verified.values()].map((r) => r.repo));
    expect(all.size).toBe(12);
    expect(new Set(REAL_CASES.map((c) => c.repo))).toEqual(all);
    for (const c of REAL_CASES) expect(verified.get(c.id)?.repo).toBe(c.repo);
  });

  for (const c of REAL_CASES) {
    it(`${c.id}: exact files, statuses, hunk ranges and changed ranges`, () => {
      const patch = goldPatch(c.id);
      expect(summary(parseUnifiedDiff(patch))).toEqual(c.files);
      expect(goldFilesFromPatch(patch)).toEqual(c.files.map((f) => f.path));
    });
  }

  it('parses all 500 gold patches with the same per-file +/- counts as git apply --numstat', () => {
    const all = [...verified.values()].map((r) => r.patch);
    const ours = all.flatMap((patch) =>
      parseUnifiedDiff(patch).map((f) => {
        const lines = f.hunks.flatMap((h) => h.lines);
        const count = (kind: string) => lines.filter((l) => l.kind === kind).length;
        return `${count('+')}\t${count('-')}\t${f.newPath ?? f.path}`;
      }),
    );
    const dir = mkdtempSync(path.join(tmpdir(), 'gold-patches-'));
    try {
      const file = path.join(dir, 'all.diff');
      writeFileSync(file, all.map((p) => (p.endsWith('\n') ? p : p + '\n')).join(''));
      const git = execFileSync('git', ['apply', '--numstat', file], { cwd: dir, encoding: 'utf8' });
      expect(ours).toEqual(git.trim().split('\n'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(ours).toHaveLength(623);
    // astropy-13398's new file: 145 added lines, no pre-image.
    const added = parseUnifiedDiff(goldPatch('astropy__astropy-13398'))[3]!;
    expect(added.oldPath).toBeNull();
    expect(added.newMode).toBe('100644');
    expect(added.hunks[0]!.lines.filter((l) => l.kind === '+')).toHaveLength(145);
  });

  it('keeps the hunk header hint and per-line numbering', () => {
    const [file] = parseUnifiedDiff(goldPatch('pytest-dev__pytest-6202'));
    const hunk = file!.hunks[0]!;
    expect(hunk).toMatchObject({ oldStart: 285, oldLines: 8, newStart: 285, newLines: 7 });
    expect(hunk.header).toBe('def getmodpath(self, stopatmodule=True, includemodule=False):');
    const added = hunk.lines.find((l) => l.kind === '+')!;
    expect(added).toEqual({ kind: '+', text: '        return ".".join(parts)', oldLine: null, newLine: 288, afterOldLine: 289 });
  });
});

describe('parseUnifiedDiff on synthetic patches', () => {
  it('rename with similarity index and an edit: path is the pre-image path', () => {
    const patch = [
      'diff --git a/pkg/old_name.py b/pkg/new_name.py',
      'similarity index 91%',
      'rename from pkg/old_name.py',
      'rename to pkg/new_name.py',
      'index 1111111..2222222 100644',
      '--- a/pkg/old_name.py',
      '+++ b/pkg/new_name.py',
      '@@ -3,3 +3,3 @@ def f():',
      ' a = 1',
      '-b = 2',
      '+b = 3',
      ' c = 4',
      '',
    ].join('\n');
    const [file] = parseUnifiedDiff(patch);
    expect(file).toMatchObject({
      path: 'pkg/old_name.py',
      oldPath: 'pkg/old_name.py',
      newPath: 'pkg/new_name.py',
      status: 'renamed',
      similarity: 91,
      oldMode: '100644',
      hunkRanges: [[3, 5]],
      preImageChangedRanges: [[4, 4]],
    });
    expect(goldFilesFromPatch(patch)).toEqual(['pkg/old_name.py']);
  });

  it('pure rename (no hunks) and copy', () => {
    const patch = [
      'diff --git a/a.txt b/b.txt',
      'similarity index 100%',
      'rename from a.txt',
      'rename to b.txt',
      'diff --git a/src/x.py b/src/y.py',
      'similarity index 100%',
      'copy from src/x.py',
      'copy to src/y.py',
    ].join('\n');
    expect(parseUnifiedDiff(patch).map((f) => [f.path, f.status, f.oldPath, f.newPath, f.hunks.length])).toEqual([
      ['a.txt', 'renamed', 'a.txt', 'b.txt', 0],
      ['src/y.py', 'copied', 'src/x.py', 'src/y.py', 0],
    ]);
  });

  it('new and deleted files, with and without mode lines', () => {
    const patch = [
      'diff --git a/new.py b/new.py',
      'new file mode 100755',
      'index 0000000..3333333',
      '--- /dev/null',
      '+++ b/new.py',
      '@@ -0,0 +1,2 @@',
      '+x = 1',
      '+y = 2',
      'diff --git a/gone.py b/gone.py',
      'deleted file mode 100644',
      '--- a/gone.py',
      '+++ /dev/null',
      '@@ -1,3 +0,0 @@',
      '-a',
      '-b',
      '-c',
      '--- /dev/null',
      '+++ b/plain_new.txt',
      '@@ -0,0 +1 @@',
      '+hello',
    ].join('\n');
    const files = parseUnifiedDiff(patch);
    expect(files.map((f) => [f.path, f.status, f.oldPath, f.newPath, f.newMode, f.hunkRanges, f.preImageChangedRanges])).toEqual([
      ['new.py', 'added', null, 'new.py', '100755', [], []],
      ['gone.py', 'deleted', 'gone.py', null, null, [[1, 3]], [[1, 3]]],
      ['plain_new.txt', 'added', null, 'plain_new.txt', null, [], []],
    ]);
    expect(files[1]!.oldMode).toBe('100644');
  });

  it('mode-only change', () => {
    const [file] = parseUnifiedDiff('diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n');
    expect(file).toMatchObject({ path: 'run.sh', status: 'modified', oldMode: '100644', newMode: '100755', hunks: [] });
  });

  it('binary files: "Binary files differ" and GIT binary patch', () => {
    const patch = [
      'diff --git a/img/logo.png b/img/logo.png',
      'index 1234567..89abcde 100644',
      'Binary files a/img/logo.png and b/img/logo.png differ',
      'diff --git a/data/blob.bin b/data/blob.bin',
      'new file mode 100644',
      'index 0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391',
      'GIT binary patch',
      'literal 12',
      'TcmZQzWMXDvWn^Gv<Nzc900RI3',
      '',
      'literal 0',
      'HcmV?d00001',
      '',
      'diff --git a/z.py b/z.py',
      '--- a/z.py',
      '+++ b/z.py',
      '@@ -1 +1 @@',
      '-old',
      '+new',
    ].join('\n');
    const files = parseUnifiedDiff(patch);
    expect(files.map((f) => [f.path, f.status, f.isBinary, f.hunks.length])).toEqual([
      ['img/logo.png', 'modified', true, 0],
      ['data/blob.bin', 'added', true, 0],
      ['z.py', 'modified', false, 1],
    ]);
    expect(files[2]!.hunkRanges).toEqual([[1, 1]]);
  });

  it('CRLF line endings in the patch', () => {
    const patch = 'diff --git a/w.py b/w.py\r\n--- a/w.py\r\n+++ b/w.py\r\n@@ -1,3 +1,3 @@\r\n a\r\n-b\r\n+B\r\n c\r\n';
    const [file] = parseUnifiedDiff(patch);
    expect(file!.path).toBe('w.py');
    expect(file!.hunks[0]!.lines.map((l) => l.kind + l.text)).toEqual([' a', '-b', '+B', ' c']);
    expect(file!.preImageChangedRanges).toEqual([[2, 2]]);
  });

  it('"\\ No newline at end of file" on either side', () => {
    const patch = [
      'diff --git a/n.py b/n.py',
      '--- a/n.py',
      '+++ b/n.py',
      '@@ -1,2 +1,2 @@',
      ' first',
      '-last',
      '\\ No newline at end of file',
      '+last',
    ].join('\n');
    const [file] = parseUnifiedDiff(patch + '\n');
    const hunk = file!.hunks[0]!;
    expect(hunk.lines.map((l) => l.kind)).toEqual([' ', '-', '+']);
    expect([hunk.oldNoNewlineAtEof, hunk.newNoNewlineAtEof]).toEqual([true, false]);
    const [both] = parseUnifiedDiff(patch + '\n\\ No newline at end of file\n');
    expect([both!.hunks[0]!.oldNoNewlineAtEof, both!.hunks[0]!.newNoNewlineAtEof]).toEqual([true, true]);
  });

  it('zero-length pre-image ranges: insertion after line 10 touches [10, 10]; at the top, [1, 1]', () => {
    const patch = [
      'diff --git a/m.py b/m.py',
      '--- a/m.py',
      '+++ b/m.py',
      '@@ -0,0 +1,1 @@',
      '+import os',
      '@@ -10,0 +12,2 @@ def g():',
      '+    x = 1',
      '+    y = 2',
      '@@ -20,2 +23,0 @@',
      '-gone1',
      '-gone2',
    ].join('\n');
    const [file] = parseUnifiedDiff(patch);
    expect(file!.hunkRanges).toEqual([
      [1, 1],
      [10, 10],
      [20, 21],
    ]);
    expect(file!.preImageChangedRanges).toEqual([
      [1, 1],
      [10, 10],
      [20, 21],
    ]);
    expect(file!.hunks[1]!.lines.map((l) => [l.afterOldLine, l.newLine])).toEqual([
      [10, 12],
      [10, 13],
    ]);
  });

  it('hunks without counts, adjacent changes merged, insertion next to a removal is a replacement', () => {
    const patch = [
      'diff --git a/c.py b/c.py',
      '--- a/c.py',
      '+++ b/c.py',
      '@@ -1 +1 @@',
      '-one',
      '+uno',
      '@@ -5,6 +5,6 @@',
      ' five',
      '-six',
      '-seven',
      '+SIX',
      ' eight',
      '-nine',
      '+NINE',
      '+NINE-AND-A-HALF',
      ' ten',
    ].join('\n');
    const [file] = parseUnifiedDiff(patch);
    expect(file!.hunks.map((h) => [h.oldStart, h.oldLines, h.newStart, h.newLines])).toEqual([
      [1, 1, 1, 1],
      [5, 6, 5, 6],
    ]);
    expect(file!.hunkRanges).toEqual([
      [1, 1],
      [5, 10],
    ]);
    expect(file!.preImageChangedRanges).toEqual([
      [1, 1],
      [6, 7],
      [9, 9],
    ]);
  });

  it('quoted paths with spaces, escapes and UTF-8 octal bytes; unquoted paths with spaces', () => {
    const patch = [
      'diff --git "a/docs/my file.py" "b/docs/my file.py"',
      '--- "a/docs/my file.py"',
      '+++ "b/docs/my file.py"',
      '@@ -1 +1 @@',
      '-a',
      '+b',
      'diff --git "a/caf\\303\\251/tab\\there.py" "b/caf\\303\\251/tab\\there.py"',
      '--- "a/caf\\303\\251/tab\\there.py"',
      '+++ "b/caf\\303\\251/tab\\there.py"',
      '@@ -1 +1 @@',
      '-a',
      '+b',
      'diff --git a/with space.txt b/with space.txt',
      'old mode 100644',
      'new mode 100755',
      'diff --git a/x y.txt b/z w.txt',
      'similarity index 100%',
      'rename from x y.txt',
      'rename to z w.txt',
      'diff --git a/dated.py b/dated.py',
      '--- a/dated.py\t2024-01-01 10:00:00.000000000 +0000',
      '+++ b/dated.py\t2024-01-02 10:00:00.000000000 +0000',
      '@@ -1 +1 @@',
      '-a',
      '+b',
    ].join('\n');
    expect(goldFilesFromPatch(patch)).toEqual(['docs/my file.py', 'café/tab\there.py', 'with space.txt', 'x y.txt', 'dated.py']);
    expect(parseUnifiedDiff(patch)[3]!.newPath).toBe('z w.txt');
  });

  it('dedupes paths, skips a commit-message preamble and a mail signature', () => {
    const patch = [
      'From 1234 Mon Sep 17 00:00:00 2001',
      'Subject: [PATCH] fix',
      '',
      '---',
      ' a.py | 2 +-',
      '',
      'diff --git a/a.py b/a.py',
      '--- a/a.py',
      '+++ b/a.py',
      '@@ -1 +1 @@',
      '-x',
      '+y',
      'diff --git a/a.py b/a.py',
      '--- a/a.py',
      '+++ b/a.py',
      '@@ -9 +9 @@',
      '-p',
      '+q',
      '-- ',
      '2.43.0',
    ].join('\n');
    expect(goldFilesFromPatch(patch)).toEqual(['a.py']);
    expect(parseUnifiedDiff(patch)).toHaveLength(2);
  });

  it('keeps removed lines that look like headers inside a hunk', () => {
    const patch = [
      'diff --git a/notes.md b/notes.md',
      '--- a/notes.md',
      '+++ b/notes.md',
      '@@ -1,2 +1,2 @@',
      '--- a list item',
      '+++ plus plus',
      ' diff --git lookalike',
    ].join('\n');
    const [file] = parseUnifiedDiff(patch);
    expect(file!.hunks[0]!.lines.map((l) => l.kind + l.text)).toEqual(['--- a list item', '+++ plus plus', ' diff --git lookalike']);
    expect(file!.preImageChangedRanges).toEqual([[1, 1]]);
  });
});

describe('parseUnifiedDiff on malformed input', () => {
  const errorOf = (patch: string) => {
    try {
      parseUnifiedDiff(patch);
    } catch (error) {
      return error as PatchParseError;
    }
    throw new Error('expected a PatchParseError');
  };
  const header = 'diff --git a/f.py b/f.py\n--- a/f.py\n+++ b/f.py\n';

  it('names the line and what is wrong', () => {
    const cases: [string, number, RegExp][] = [
      ['', 1, /patch is empty/],
      ['just some prose\nwith no diff\n', 1, /no file sections found/],
      ['@@ -1 +1 @@\n-a\n+b\n', 1, /before any file header/],
      [header + '@@ -1,x +1 @@\n', 4, /malformed hunk header '@@ -1,x \+1 @@'/],
      [header + '@@ -1,3 +1,3 @@\n a\n-b\n', 6, /truncated at end of patch: expected 1 more pre-image and 2 more post-image/],
      [header + '@@ -1,2 +1,2 @@\n a\n?b\n+c\n', 6, /truncated: expected 1 more pre-image and 1 more post-image lines, found '\?b'/],
      [header + '@@ -1,1 +1,1 @@\n-a\n+b\n+c\n', 7, /after hunk '@@ -1,1 \+1,1 @@' was complete: the hunk header counts are wrong/],
      [header + '@@ -1,1 +1,2 @@\n-a\n-b\n', 6, /removes more lines than its header counts/],
      ['diff --git a/f.py b/f.py\n@@ -1 +1 @@\n-a\n+b\n', 2, /no '---'\/'\+\+\+' file header/],
      ['diff --git a/f.py b/g.py\nrename from f.py\n', 2, /only one of 'rename from'\/'rename to'/],
      ['diff --git "a/f.py b/f.py\n', 1, /unterminated quoted path/],
      [header + '@@ -0,2 +1,2 @@\n-a\n-b\n+c\n+d\n', 4, /starts at pre-image line 0 but removes lines/],
    ];
    for (const [patch, line, message] of cases) {
      const error = errorOf(patch);
      expect(error).toBeInstanceOf(PatchParseError);
      expect(error.lineNumber, patch).toBe(line);
      expect(error.message).toMatch(message);
      expect(error.message).toMatch(new RegExp(`^patch line ${line}: `));
    }
  });

  it('rejects a non-string patch with a TypeError', () => {
    expect(() => parseUnifiedDiff(undefined as unknown as string)).toThrow(TypeError);
  });
});
