import path from 'node:path';
import type { RepoName } from './repo-name';

/**
 * On-disk layout (App. A.2: one shared bare object database per repository, one light tree per commit):
 *
 *     <cacheDir>/<owner>__<name>.git              bare clone (complete once it holds CLONE_MARKER)
 *     <cacheDir>/.<owner>__<name>.git.tmp-*        a clone in progress; renamed into place when complete
 *     <cacheDir>/locks/<owner>__<name>.lock        cross-process lock for everything touching that repo
 *     <worktreesDir>/<owner>__<name>/<commit>/     detached worktree at <commit>
 *
 * A worktree's completion marker lives in its git admin dir (`<bare>/worktrees/<id>/`), not in the tree, so
 * grep/glob/read never see it and `git worktree remove` deletes it with the registration.
 */
export const CLONE_MARKER = 'codegrep-clone.json';
export const WORKTREE_MARKER = 'codegrep-worktree.json';

export function bareRepoPath(cacheDir: string, repo: RepoName): string {
  return path.join(path.resolve(cacheDir), `${repo.slug}.git`);
}

export function cloneTempPrefix(repo: RepoName): string {
  return `.${repo.slug}.git.tmp-`;
}

export function repoLockPath(cacheDir: string, repo: RepoName): string {
  return path.join(path.resolve(cacheDir), 'locks', `${repo.slug}.lock`);
}

export function worktreePath(worktreesDir: string, repo: RepoName, commit: string): string {
  return path.join(path.resolve(worktreesDir), repo.slug, commit);
}
