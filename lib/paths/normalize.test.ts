import { describe, expect, it } from 'vitest';
import { dedupeEntityIds, dedupePaths, normalizeEntityId, normalizeRepoPath, patchPathToRepoPath } from './normalize';

describe('normalizeRepoPath', () => {
  it.each([
    ['./django/db/models/query.py', 'django/db/models/query.py'],
    ['././a.py', 'a.py'],
    ['django\\db\\models\\query.py', 'django/db/models/query.py'],
    ['django//db///models/query.py', 'django/db/models/query.py'],
    ['django/db/', 'django/db'],
    ['  django/db/models.py \n', 'django/db/models.py'],
    ['a/./b/../c.py', 'a/c.py'],
    ['../outside.py', '../outside.py'],
    ['a/../../outside.py', '../outside.py'],
    ['/abs/path.py', '/abs/path.py'],
    ['.', ''],
    ['', ''],
  ])('%j → %j', (raw, expected) => {
    expect(normalizeRepoPath(raw)).toBe(expected);
  });

  it('never strips a/ or b/ from ordinary paths: they may be real directories', () => {
    expect(normalizeRepoPath('a/b.py')).toBe('a/b.py');
    expect(normalizeRepoPath('b/setup.py')).toBe('b/setup.py');
  });

  it('strips a known worktree root, and only that root', () => {
    const root = '/workspace/django__django__3.0/';
    expect(normalizeRepoPath('/workspace/django__django__3.0/django/db/models.py', { root })).toBe('django/db/models.py');
    expect(normalizeRepoPath('/workspace//django__django__3.0//django/db.py', { root })).toBe('django/db.py');
    expect(normalizeRepoPath('/workspace/django__django__3.01/x.py', { root })).toBe('/workspace/django__django__3.01/x.py');
    expect(normalizeRepoPath('/other/x.py', { root })).toBe('/other/x.py');
    expect(normalizeRepoPath('django/x.py', { root })).toBe('django/x.py');
  });
});

describe('patchPathToRepoPath', () => {
  it('strips exactly one git diff prefix', () => {
    expect(patchPathToRepoPath('a/django/db/models.py')).toBe('django/db/models.py');
    expect(patchPathToRepoPath('b/django/db/models.py')).toBe('django/db/models.py');
    expect(patchPathToRepoPath('a/a/nested.py')).toBe('a/nested.py');
    expect(patchPathToRepoPath('b/a/x.py')).toBe('a/x.py');
  });
  it('keeps prefix-less (--no-prefix) paths and maps /dev/null to null', () => {
    expect(patchPathToRepoPath('django/db.py')).toBe('django/db.py');
    expect(patchPathToRepoPath('ab/x.py')).toBe('ab/x.py');
    expect(patchPathToRepoPath('/dev/null')).toBeNull();
  });
});

describe('dedupePaths', () => {
  it('normalises, drops empties and repeats, keeps first-occurrence order', () => {
    expect(dedupePaths(['b.py', './a.py', 'b.py', 'a.py', '', 'pkg\\c.py', 'pkg/c.py/'])).toEqual(['b.py', 'a.py', 'pkg/c.py']);
  });
});

describe('entity ids', () => {
  it('normalise the file part only', () => {
    expect(normalizeEntityId('./django\\db\\models/query.py:QuerySet.filter')).toBe('django/db/models/query.py:QuerySet.filter');
    expect(normalizeEntityId('pkg//mod.py: func ')).toBe('pkg/mod.py:func');
    expect(normalizeEntityId('pkg/mod.py')).toBe('pkg/mod.py');
    expect(normalizeEntityId('pkg/mod.py:')).toBe('pkg/mod.py');
    expect(normalizeEntityId(':Class')).toBe('');
  });
  it('dedupe after normalisation, in order', () => {
    expect(dedupeEntityIds(['a.py:A.f', './a.py:A.f', 'a.py:A', 'a.py:A.f'])).toEqual(['a.py:A.f', 'a.py:A']);
  });
});
