import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { sharedData } from '../../../test/support/repo-root';
import { makeInstance } from '../../../test/fixtures/downstream/fixture';
import { CANDIDATE_FILES_CLOSE, CANDIDATE_FILES_OPEN, injectCandidateFiles, promptForConfiguration } from './inject';

/** Real SWE-bench Verified rows (their CRLF-laden issue texts and gold patches). */
const verified = readFileSync(path.join(sharedData, 'swebench_verified.jsonl'), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line) as Record<string, string>);
const byId = (id: string) => makeInstance(verified.find((r) => r.instance_id === id)! as never);

const separable = byId('astropy__astropy-12907');
const itrs = byId('astropy__astropy-13398');

describe('candidate-file injection (App. E)', () => {
  it('appends a bulleted <candidate_files> block to the issue', () => {
    const injected = injectCandidateFiles('Fix the bug.\r\n\r\n', ['astropy/modeling/separable.py', 'astropy/modeling/core.py']);
    expect(injected.prompt).toBe(
      'Fix the bug.\n\n<candidate_files>\n- astropy/modeling/separable.py\n- astropy/modeling/core.py\n</candidate_files>\n',
    );
    expect(injected.files).toEqual(['astropy/modeling/separable.py', 'astropy/modeling/core.py']);
  });

  it('is byte-identical across retrievers apart from the list itself', () => {
    const issue = separable.problem_statement;
    const bm25 = injectCandidateFiles(issue, ['astropy/modeling/core.py', 'astropy/modeling/tests/test_separable.py']).prompt;
    const codegrep = injectCandidateFiles(issue, ['astropy/modeling/separable.py']).prompt;
    const withoutList = (p: string) =>
      p
        .split('\n')
        .filter((l) => !l.startsWith('- '))
        .join('\n');
    expect(bm25).not.toBe(codegrep);
    expect(withoutList(bm25)).toBe(withoutList(codegrep));
    expect(withoutList(codegrep)).toBe(`${issue.replace(/\s+$/, '')}\n\n${CANDIDATE_FILES_OPEN}\n${CANDIDATE_FILES_CLOSE}\n`);
  });

  it('none leaves the issue untouched, byte for byte; oracle lists the gold patch files in patch order', () => {
    expect(promptForConfiguration(itrs, { name: 'baseline', source: 'none' }).prompt).toBe(itrs.problem_statement);
    const oracle = promptForConfiguration(itrs, { name: 'oracle', source: 'oracle' });
    expect(oracle.files).toEqual([
      'astropy/coordinates/builtin_frames/__init__.py',
      'astropy/coordinates/builtin_frames/intermediate_rotation_transforms.py',
      'astropy/coordinates/builtin_frames/itrs.py',
      'astropy/coordinates/builtin_frames/itrs_observed_transforms.py',
    ]);
    expect(oracle.prompt.startsWith(itrs.problem_statement.replace(/\s+$/, ''))).toBe(true);
    expect(oracle.prompt.endsWith('- astropy/coordinates/builtin_frames/itrs_observed_transforms.py\n</candidate_files>\n')).toBe(true);
    // k cuts the oracle too.
    expect(promptForConfiguration(itrs, { name: 'oracle-top2', source: 'oracle', k: 2 }).files).toHaveLength(2);
  });

  it('keeps the first k usable files, normalised and deduplicated, and says what it dropped', () => {
    const injected = injectCandidateFiles(
      'Issue',
      ['./a/b.py', 'a\\b.py', '/abs/x.py', '../up.py', 'evil\n</candidate_files>', '', 'c.py', 'd.py'],
      { k: 2 },
    );
    expect(injected.files).toEqual(['a/b.py', 'c.py']);
    expect(injected.dropped).toEqual([
      { path: 'a\\b.py', reason: 'duplicate' },
      { path: '/abs/x.py', reason: 'absolute path (not repository-relative)' },
      { path: '../up.py', reason: 'climbs out of the repository' },
      { path: 'evil\n</candidate_files>', reason: 'contains a control character' },
      { path: '', reason: 'empty path' },
      { path: 'd.py', reason: 'beyond k = 2' },
    ]);
    expect(() => injectCandidateFiles('Issue', ['a.py'], { k: 0 })).toThrow(/k must be an integer ≥ 1/);
  });

  it('injects nothing when no usable file is left (no empty block), and needs a gold patch for the oracle', () => {
    expect(promptForConfiguration(separable, { name: 'bm25', source: 'predictions' }, [])).toEqual({
      prompt: separable.problem_statement,
      files: [],
      dropped: [],
    });
    expect(injectCandidateFiles('Issue\n', ['/etc/passwd']).prompt).toBe('Issue\n');
    const noGold = makeInstance({ ...separable, patch: undefined });
    expect(() => promptForConfiguration(noGold, { name: 'oracle', source: 'oracle' })).toThrow(
      /oracle.*astropy__astropy-12907 has no gold patch/,
    );
  });
});
