import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../test/python/run-bm25-reference';
import { cutPrediction, readPredictionsFile } from './predictions-file';

const dir = mkdtempSync(path.join(tmpdir(), 'predictions-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Real instance ids and gold-patch files from SWE-bench Verified. */
const instances = readFileSync(path.resolve(REPO_ROOT, '../shared/data/swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .slice(0, 3)
  .map((l) => JSON.parse(l) as { instance_id: string; patch: string })
  .map((r) => ({ id: r.instance_id, files: [...r.patch.matchAll(/^diff --git a\/(\S+)/gm)].map((m) => m[1]!) }));

function writeLines(name: string, lines: string[]): string {
  const file = path.join(dir, name);
  writeFileSync(file, lines.join('\n'));
  return file;
}

describe('readPredictionsFile', () => {
  const [first, second, third] = instances as [(typeof instances)[0], (typeof instances)[0], (typeof instances)[0]];
  const lines = [
    JSON.stringify({
      instance_id: first.id,
      found_files: [`./${first.files[0]}`, 'other/x.py', first.files[0], 'third.py'],
      found_modules: [`${first.files[0]}:Klass`],
      found_entities: [`${first.files[0]}:Klass.method`, `${first.files[0]}:func`],
      raw_output_loc: ['ignored'],
    }),
    '',
    '{"instance_id": "broken", "found_files": [',
    JSON.stringify({ instance_id: second.id, found_files: 'not-a-list' }),
    JSON.stringify({ found_files: ['a.py'] }),
    JSON.stringify({
      instance_id: second.id,
      found_files: ['pkg\\a.py'],
      found_entities: ['pkg/a.py:A.f', 'pkg/a.py:g'],
      found_modules: null,
    }),
    JSON.stringify({ instance_id: first.id, found_files: ['dup.py'] }),
    JSON.stringify({ instance_id: third.id, found_files: [] }),
    '[]',
  ];

  it('reads good lines, counts and describes bad ones without stopping', async () => {
    const result = await readPredictionsFile(writeLines('mixed.jsonl', lines));
    expect(result.linesRead).toBe(9);
    expect(result.blankLines).toBe(1);
    expect(result.predictions.map((p) => p.instanceId)).toEqual([first.id, second.id, third.id]);
    expect(result.errors.map((e) => e.line)).toEqual([3, 4, 5, 7, 9]);
    expect(result.errors[0]!.message).toMatch(/^invalid JSON/);
    expect(result.errors[1]!.message).toMatch(/^found_files: /);
    expect(result.errors[2]!.message).toMatch(/^instance_id: /);
    expect(result.errors[3]!.message).toBe(`duplicate instance_id "${first.id}" (first on line 1); ignored`);
    expect(result.errors[4]!.message).toMatch(/^\(line\): /);
  });

  it('normalises and de-duplicates in rank order, deriving modules from entities when absent', async () => {
    const { predictions } = await readPredictionsFile(writeLines('mixed2.jsonl', lines));
    expect(predictions[0]).toEqual({
      instanceId: first.id,
      files: [first.files[0], 'other/x.py', 'third.py'],
      modules: [`${first.files[0]}:Klass`],
      functions: [`${first.files[0]}:Klass.method`, `${first.files[0]}:func`],
    });
    expect(predictions[1]).toEqual({
      instanceId: second.id,
      files: ['pkg/a.py'],
      modules: ['pkg/a.py:A'],
      functions: ['pkg/a.py:A.f', 'pkg/a.py:g'],
    });
    expect(predictions[2]).toEqual({ instanceId: third.id, files: [] });
  });

  it('cuts every ranked list to the top K', async () => {
    const { predictions } = await readPredictionsFile(writeLines('topk.jsonl', lines), { topK: 1 });
    expect(predictions[0]).toMatchObject({ files: [first.files[0]], functions: [`${first.files[0]}:Klass.method`] });
    expect(cutPrediction({ instanceId: 'x', files: ['a', 'b', 'c'] }, 2)).toEqual({ instanceId: 'x', files: ['a', 'b'] });
    await expect(readPredictionsFile(writeLines('k0.jsonl', lines), { topK: 0 })).rejects.toThrow(/topK/);
  });

  it('fails clearly only when the file itself cannot be read', async () => {
    await expect(readPredictionsFile(path.join(dir, 'missing.jsonl'))).rejects.toThrow(/cannot read predictions file .*missing\.jsonl/);
    await expect(readPredictionsFile(dir)).rejects.toThrow(/cannot read predictions file/);
  });
});
