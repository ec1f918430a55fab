import { describe, expect, it } from 'vitest';
import { WorktreeError } from './errors';
import { parseCommit, parseRepoName, repoFromSlug } from './repo-name';

describe('parseRepoName', () => {
  it.each([
    ['../x', /owner/],
    ['a/b/c', /exactly one "\/"/],
    ['-oops/x', /owner/],
    ['x/-oops', /name/],
    ['a/..', /"\." or "\.\."/],
    ['a/.', /"\." or "\.\."/],
    ['own__er/x', /"__"/],
    ['owner_/x', /"__" or end in "_"/],
    ['', /exactly one/],
    ['noslash', /exactly one/],
    ['a/b c', /name/],
    ['a/b;rm -rf', /name/],
    ['a/b:c', /name/],
    ['a\\b/c', /owner/],
    ['a/' + 'n'.repeat(101), /name/],
  ])('refuses %j', (repo, why) => {
    let err: unknown;
    try {
      parseRepoName(repo);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WorktreeError);
    const e = err as WorktreeError;
    expect(e.code).toBe('bad-repo-name');
    expect(e.retryable).toBe(false);
    expect(e.message).toContain(JSON.stringify(repo));
    expect(e.message).toMatch(why);
  });

  it('refuses non-strings', () => {
    expect(() => parseRepoName(42)).toThrow(/expected a string/);
  });

  it.each([
    ['django/django', 'django__django'],
    ['psf/requests', 'psf__requests'],
    ['scikit-learn/scikit-learn', 'scikit-learn__scikit-learn'],
    ['a_b/c', 'a_b__c'],
    ['foo/bar__baz', 'foo__bar__baz'],
    ['foo/_x', 'foo___x'],
    ['org/.github', 'org__.github'],
  ])('accepts %j as slug %j and maps the slug back', (repo, slug) => {
    const parsed = parseRepoName(repo);
    expect(parsed.slug).toBe(slug);
    expect(repoFromSlug(slug)?.repo).toBe(repo);
  });

  it('does not map arbitrary directory names to repositories', () => {
    expect(repoFromSlug('locks')).toBeUndefined();
    expect(repoFromSlug('__x')).toBeUndefined();
    expect(repoFromSlug('.acme__w.git.tmp-1')).toBeUndefined();
  });
});

describe('parseCommit', () => {
  const sha = 'a'.repeat(40);
  it('accepts full SHA-1 and SHA-256 ids, lower-cased', () => {
    expect(parseCommit(sha.toUpperCase(), 'o/n')).toBe(sha);
    expect(parseCommit('b'.repeat(64), 'o/n')).toBe('b'.repeat(64));
  });
  it.each(['abc1234', 'g'.repeat(40), `${sha}/..`, '--output=x', 'HEAD', ''])('refuses %j naming the repo', (c) => {
    expect(() => parseCommit(c, 'acme/widgets')).toThrow(/commit .* for acme\/widgets refused: expected a full 40-hex/);
  });
});
