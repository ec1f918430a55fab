import * as arrow from 'apache-arrow';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  GROUND_TRUTH_COLUMNS,
  GROUND_TRUTH_SCHEMA_VERSION,
  GroundTruthSchema,
  groundTruthArrowFields,
  groundTruthFromColumns,
  groundTruthToColumns,
  type GroundTruth,
} from '../../schemas/ground-truth';
import { hashConfig } from '../artifacts/config-hash';
import { readParquetObjects } from '../artifacts/read-parquet';
import { writeParquetArtifact } from '../artifacts/write-parquet';
import { groundTruthForPatch, type ReadPreImage } from './ground-truth';
import { locateHunks } from './locate-hunks';
import { parseUnifiedDiff, PatchParseError } from './parse-diff';

const repoRoot = path.resolve(import.meta.dirname, '../..');
const fixtures = path.resolve(import.meta.dirname, '../../test/fixtures/patch/swebench-pre-images');
const goldPatches = new Map<string, string>(
  readFileSync(path.resolve(repoRoot, '../shared/data/swebench_verified.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { instance_id: string; patch: string })
    .map((row) => [row.instance_id, row.patch]),
);

/** Pre-images stored from each instance's base commit (see test/fixtures/patch/swebench-pre-images/README.md). */
const fixturePreImage =
  (instanceId: string): ReadPreImage =>
  async (file) => {
    try {
      return await readFile(path.join(fixtures, instanceId, `${file}.pre`), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  };

const truthOf = (instanceId: string) => groundTruthForPatch(goldPatches.get(instanceId)!, fixturePreImage(instanceId));

describe('groundTruthForPatch on real gold patches with real base-commit pre-images', () => {
  it('psf__requests-1921: insertion inside a top-level function', async () => {
    expect(await truthOf('psf__requests-1921')).toEqual({
      files: ['requests/sessions.py'],
      lineRanges: [{ path: 'requests/sessions.py', start: 59, end: 64 }],
      changedLineRanges: [{ path: 'requests/sessions.py', start: 61, end: 61 }],
      modules: [],
      functions: ['requests/sessions.py:merge_setting'],
      newFiles: [],
      deletedFiles: [],
      preImageErrors: [],
    });
  });

  it('pallets__flask-5014: insertion inside a method names the method and its class', async () => {
    const truth = await truthOf('pallets__flask-5014');
    expect([truth.modules, truth.functions]).toEqual([
      ['src/flask/blueprints.py:Blueprint'],
      ['src/flask/blueprints.py:Blueprint.__init__'],
    ]);
  });

  it('mwaskom__seaborn-3187: the hunk hint "def spacer" is a nested function; the edit belongs to _setup', async () => {
    const truth = await truthOf('mwaskom__seaborn-3187');
    expect(truth.modules).toEqual(['seaborn/_core/scales.py:ContinuousBase']);
    expect(truth.functions).toEqual(['seaborn/_core/scales.py:ContinuousBase._setup', 'seaborn/utils.py:locator_to_legend_entries']);
  });

  it('sphinx-doc__sphinx-7462: hunks are placed where git applies them (offset +9), nested unparse → _parse_annotation', async () => {
    const patch = goldPatches.get('sphinx-doc__sphinx-7462')!;
    expect(parseUnifiedDiff(patch)[0]!.hunkRanges).toEqual([[105, 115]]);
    expect(await truthOf('sphinx-doc__sphinx-7462')).toEqual({
      files: ['sphinx/domains/python.py', 'sphinx/pycode/ast.py'],
      lineRanges: [
        { path: 'sphinx/domains/python.py', start: 114, end: 124 },
        { path: 'sphinx/pycode/ast.py', start: 114, end: 120 },
      ],
      changedLineRanges: [
        { path: 'sphinx/domains/python.py', start: 117, end: 121 },
        { path: 'sphinx/pycode/ast.py', start: 117, end: 117 },
      ],
      modules: [],
      functions: ['sphinx/domains/python.py:_parse_annotation', 'sphinx/pycode/ast.py:unparse'],
      newFiles: [],
      deletedFiles: [],
      preImageErrors: [],
    });
    const preImage = (await fixturePreImage('sphinx-doc__sphinx-7462')('sphinx/domains/python.py'))!;
    // The hunk's first context line and first removed line, at their real base-commit line numbers 114 and 117.
    expect(preImage.split('\n')[114 - 1]).toBe("            result.append(addnodes.desc_sig_punctuation('', ']'))");
    expect(preImage.split('\n')[117 - 1]).toBe('            result = []');
  });
});

describe('locateHunks', () => {
  const pre = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j'].join('\n') + '\n';
  const header = '--- a/f\n+++ b/f\n';

  it('keeps a hunk that matches where stated, moves one that matches elsewhere, carries the offset on', () => {
    const file = parseUnifiedDiff(header + '@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -4,2 +4,2 @@\n f\n-g\n+G\n@@ -6,1 +6,1 @@\n-i\n+I\n')[0]!;
    const located = locateHunks(pre, file);
    expect(located.hunks.map((h) => [h.oldStart, h.newStart])).toEqual([
      [1, 1],
      [6, 6],
      [9, 9],
    ]);
    expect(located.hunkRanges).toEqual([
      [1, 2],
      [6, 7],
      [9, 9],
    ]);
    expect(located.preImageChangedRanges).toEqual([
      [2, 2],
      [7, 7],
      [9, 9],
    ]);
    expect(located.hunks[1]!.lines.map((l) => [l.oldLine, l.newLine])).toEqual([
      [6, 6],
      [7, null],
      [null, 7],
    ]);
  });

  it('prefers the nearest match and never goes back before the previous hunk', () => {
    const repeated = ['x', 'y', 'x', 'y', 'x', 'y'].join('\n') + '\n';
    const file = parseUnifiedDiff(header + '@@ -4,1 +4,1 @@\n-x\n+X\n@@ -4,1 +4,1 @@\n-x\n+Z\n')[0]!;
    expect(locateHunks(repeated, file).hunkRanges).toEqual([
      [3, 3],
      [5, 5],
    ]);
  });

  it('names the file and hunk when a hunk matches nowhere', () => {
    const file = parseUnifiedDiff(header + '@@ -2,1 +2,1 @@\n-nothere\n+x\n')[0]!;
    expect(() => locateHunks(pre, file)).toThrow('f: hunk @@ -2,1 +2,1 @@ matches nowhere in the pre-image (10 lines)');
  });
});

describe('groundTruthForPatch on synthetic multi-file patches', () => {
  const sources: Record<string, string> = {
    'pkg/core.py': ['import os', '', 'class Engine:', '    speed = 1', '', '    def run(self):', '        return os.getcwd()', ''].join(
      '\n',
    ),
    'pkg/old.py': 'def legacy():\n    return 0\n',
    'pkg/gone.py': 'x = 1\n',
    'README.md': '# Title\n\ntext\n',
    'pkg/stale.py': 'def f():\n    return 1\n',
  };
  const read: ReadPreImage = async (p) => sources[p] ?? null;
  const patch = [
    'diff --git a/pkg/core.py b/pkg/core.py',
    '--- a/pkg/core.py',
    '+++ b/pkg/core.py',
    '@@ -6,2 +6,2 @@ class Engine:',
    '     def run(self):',
    '-        return os.getcwd()',
    '+        return os.getcwd() + "/"',
    'diff --git a/pkg/old.py b/pkg/renamed.py',
    'similarity index 80%',
    'rename from pkg/old.py',
    'rename to pkg/renamed.py',
    '--- a/pkg/old.py',
    '+++ b/pkg/renamed.py',
    '@@ -1,2 +1,2 @@',
    ' def legacy():',
    '-    return 0',
    '+    return 1',
    'diff --git a/pkg/new.py b/pkg/new.py',
    'new file mode 100644',
    '--- /dev/null',
    '+++ b/pkg/new.py',
    '@@ -0,0 +1 @@',
    '+def fresh(): pass',
    'diff --git a/pkg/gone.py b/pkg/gone.py',
    'deleted file mode 100644',
    '--- a/pkg/gone.py',
    '+++ /dev/null',
    '@@ -1 +0,0 @@',
    '-x = 1',
    'diff --git a/README.md b/README.md',
    '--- a/README.md',
    '+++ b/README.md',
    '@@ -3 +3 @@',
    '-text',
    '+more text',
    'diff --git a/logo.png b/logo.png',
    'Binary files a/logo.png and b/logo.png differ',
    'diff --git a/pkg/missing.py b/pkg/missing.py',
    '--- a/pkg/missing.py',
    '+++ b/pkg/missing.py',
    '@@ -1 +1 @@',
    '-a',
    '+b',
    'diff --git a/pkg/stale.py b/pkg/stale.py',
    '--- a/pkg/stale.py',
    '+++ b/pkg/stale.py',
    '@@ -2 +2 @@',
    '-    return 2',
    '+    return 3',
    '',
  ].join('\n');

  it('files, flags, ranges and entities per file; a bad file is reported and the others still count', async () => {
    const truth = await groundTruthForPatch(patch, read);
    expect(truth).toEqual({
      files: ['pkg/core.py', 'pkg/old.py', 'pkg/new.py', 'pkg/gone.py', 'README.md', 'logo.png', 'pkg/missing.py', 'pkg/stale.py'],
      lineRanges: [
        { path: 'pkg/core.py', start: 6, end: 7 },
        { path: 'pkg/old.py', start: 1, end: 2 },
        { path: 'pkg/gone.py', start: 1, end: 1 },
        { path: 'README.md', start: 3, end: 3 },
        { path: 'pkg/missing.py', start: 1, end: 1 },
        { path: 'pkg/stale.py', start: 2, end: 2 },
      ],
      changedLineRanges: [
        { path: 'pkg/core.py', start: 7, end: 7 },
        { path: 'pkg/old.py', start: 2, end: 2 },
        { path: 'pkg/gone.py', start: 1, end: 1 },
        { path: 'README.md', start: 3, end: 3 },
        { path: 'pkg/missing.py', start: 1, end: 1 },
        { path: 'pkg/stale.py', start: 2, end: 2 },
      ],
      modules: ['pkg/core.py:Engine'],
      functions: ['pkg/core.py:Engine.run', 'pkg/old.py:legacy'],
      newFiles: ['pkg/new.py'],
      deletedFiles: ['pkg/gone.py'],
      preImageErrors: [
        { path: 'pkg/missing.py', message: 'pre-image of pkg/missing.py does not exist' },
        { path: 'pkg/stale.py', message: 'pkg/stale.py: hunk @@ -2,1 +2,1 @@ matches nowhere in the pre-image (2 lines)' },
      ],
    });
    expect(GroundTruthSchema.parse(truth)).toEqual(truth);
  });

  it('throws PatchParseError for a malformed patch', async () => {
    await expect(groundTruthForPatch('diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n', read)).rejects.toBeInstanceOf(PatchParseError);
  });
});

describe('ground-truth columns in a real Parquet artifact', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'ground-truth-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('round-trips through writeParquetArtifact / readParquetObjects with the Arrow fields', async () => {
    const truths: GroundTruth[] = [
      await truthOf('sphinx-doc__sphinx-7462'),
      await truthOf('mwaskom__seaborn-3187'),
      {
        files: ['a.py', 'new.py'],
        lineRanges: [],
        changedLineRanges: [],
        modules: [],
        functions: [],
        newFiles: ['new.py'],
        deletedFiles: [],
        preImageErrors: [{ path: 'a.py', message: 'pre-image of a.py does not exist' }],
      },
    ];
    const schema = new arrow.Schema([new arrow.Field('instance_id', new arrow.Utf8(), false), ...groundTruthArrowFields()]);
    expect(schema.fields.map((f) => f.name)).toEqual(['instance_id', ...Object.values(GROUND_TRUTH_COLUMNS)]);
    const file = path.join(dir, 'samples.parquet');
    const ref = await writeParquetArtifact({
      path: file,
      schemaName: 'ground-truth-test',
      schemaVersion: GROUND_TRUTH_SCHEMA_VERSION,
      arrowSchema: schema,
      rows: truths.map((t, i) => ({ instance_id: `i${i}`, ...groundTruthToColumns(t) })),
      inputs: [],
      configHash: hashConfig({ test: 'ground-truth columns' }),
    });
    expect(ref.rows).toBe(3);
    const rows = await readParquetObjects(file);
    expect(rows.map((r) => groundTruthFromColumns(r))).toEqual(truths);
  });

  it('names the column when a row does not fit', () => {
    const good = groundTruthToColumns(
      GroundTruthSchema.parse({
        files: [],
        lineRanges: [],
        changedLineRanges: [],
        modules: [],
        functions: [],
        newFiles: [],
        deletedFiles: [],
        preImageErrors: [],
      }),
    );
    expect(() => groundTruthFromColumns({ ...good, gold_line_ranges: [{ path: 'a', start: 5, end: 2 }] })).toThrow(
      /^ground-truth column gold_line_ranges\.0: line range end must be >= start/,
    );
    const { gold_modules: _dropped, ...missing } = good;
    expect(() => groundTruthFromColumns(missing)).toThrow('ground-truth row is missing column gold_modules');
  });
});
