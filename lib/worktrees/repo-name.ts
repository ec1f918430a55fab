import { WorktreeError } from './errors';

/**
 * A validated `owner/name`. The name ends up in directory names and git URLs, so only a conservative
 * character set is accepted: letters, digits, `.`, `_`, `-`; no leading `-` or `.` in the owner (git would
 * read a leading `-` as an option), no name made only of dots.
 *
 * `slug` is `<owner>__<name>` (the paper's `_bare/django__django/` layout, App. A.2). It maps back to exactly
 * one repository because an owner may neither contain `__` nor end in `_`, so the first `__` of a slug always
 * ends the owner.
 */
export interface RepoName {
  repo: string;
  owner: string;
  name: string;
  slug: string;
}

const OWNER = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;
const NAME = /^[A-Za-z0-9._][A-Za-z0-9._-]{0,99}$/;

export function parseRepoName(repo: unknown): RepoName {
  const refuse = (why: string): never => {
    throw new WorktreeError('bad-repo-name', `repository name ${JSON.stringify(repo)} refused: ${why}`, {
      retryable: false,
      repo: typeof repo === 'string' ? repo : undefined,
    });
  };
  if (typeof repo !== 'string') return refuse('expected a string "owner/name"');
  const parts = repo.split('/');
  if (parts.length !== 2) return refuse('expected exactly one "/" as in "owner/name"');
  const [owner, name] = parts as [string, string];
  if (!OWNER.test(owner)) {
    return refuse('the owner must start with a letter or digit and contain only letters, digits, ".", "_", "-"');
  }
  if (owner.includes('__') || owner.endsWith('_')) return refuse('the owner may not contain "__" or end in "_"');
  if (owner.includes('..')) return refuse('the owner may not contain ".."');
  if (!NAME.test(name)) {
    return refuse('the name must not start with "-" and contain only letters, digits, ".", "_", "-"');
  }
  if (/^\.+$/.test(name)) return refuse('the name may not be "." or ".."');
  return { repo, owner, name, slug: `${owner}__${name}` };
}

/** The inverse of `slug`; undefined for a directory name that is not a slug. */
export function repoFromSlug(slug: string): RepoName | undefined {
  const at = slug.indexOf('__');
  if (at <= 0) return undefined;
  try {
    return parseRepoName(`${slug.slice(0, at)}/${slug.slice(at + 2)}`);
  } catch {
    return undefined;
  }
}

const FULL_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/**
 * A commit must be a full SHA-1 (40 hex) or SHA-256 (64 hex) object id: it names a directory, and an
 * abbreviation could become ambiguous as the repository grows. Returned lower-cased.
 */
export function parseCommit(commit: unknown, repo: string): string {
  const lowered = typeof commit === 'string' ? commit.trim().toLowerCase() : '';
  if (!FULL_SHA.test(lowered)) {
    throw new WorktreeError(
      'bad-commit',
      `commit ${JSON.stringify(commit)} for ${repo} refused: expected a full 40-hex (SHA-1) or 64-hex (SHA-256) commit id`,
      { retryable: false, repo, commit: typeof commit === 'string' ? commit : undefined },
    );
  }
  return lowered;
}

/** The key `pruneWorktrees({ keep })` matches, besides worktree paths. */
export function worktreeKey(repo: string, commit: string): string {
  return `${repo}@${commit}`;
}
