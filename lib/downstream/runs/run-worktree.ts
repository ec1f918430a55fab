import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { DEFAULT_REPO_SOURCE } from '../../../schemas/worktrees';
import { ensureBareCloneLocked, ensureCommitLocked, localOpts } from '../../worktrees/bare-clone';
import { WorktreeError } from '../../worktrees/errors';
import { git } from '../../worktrees/git';
import { repoLockPath } from '../../worktrees/layout';
import { withRepoLock } from '../../worktrees/repo-lock';
import { parseCommit, parseRepoName } from '../../worktrees/repo-name';
import { parseRepoSource } from '../../worktrees/repo-source';
import { removeWorktree, type WorktreeOptions } from '../../worktrees/worktree';

/**
 * A fresh, writable checkout for ONE (configuration, instance) agent run or harness evaluation.
 *
 * The shared worktrees of lib/worktrees are verified-clean, reused and read by the retrievers; the downstream
 * agent edits files and the harness applies patches and runs tests, so each of them gets its own throwaway
 * `git worktree add --detach` of the same bare clone (the objects are shared, only the checkout is new),
 * made under the repository's lock like every other worktree operation, and removed — registration included
 * — by `dispose()`. `scratch` is a private directory beside the checkout (never inside it, so nothing there
 * shows up in `git diff` or in the tests): patch files, prompts, outside-agent output.
 */
export interface RunWorktree {
  repo: string;
  commit: string;
  /** The checkout, HEAD detached at `commit`. */
  path: string;
  scratch: string;
  dispose(): Promise<void>;
}

export interface RunWorktreeFactory {
  /** `label` names the directory (sanitised), e.g. `agent-bm25-django__django-11099`. */
  create(repo: string, commit: string, label: string): Promise<RunWorktree>;
}

export interface GitRunWorktreeOptions extends Omit<WorktreeOptions, 'worktreesDir' | 'measureBytes'> {
  /** Where the throwaway checkouts are made (e.g. `runs/<runId>/downstream/tmp`). */
  runDir: string;
}

function sanitizeLabel(label: string): string {
  const clean = label
    .replace(/[^A-Za-z0-9._-]+/g, '_')
    .replace(/^[-.]+/, '')
    .slice(0, 80);
  return clean === '' ? 'run' : clean;
}

/** Fresh worktrees from lib/worktrees' bare clones (cloned or fetched on demand, as ensureWorktree does). */
export function gitRunWorktrees(options: GitRunWorktreeOptions): RunWorktreeFactory {
  const source = parseRepoSource(options.source ?? DEFAULT_REPO_SOURCE);
  const runDir = path.resolve(options.runDir);
  return {
    async create(repo, commit, label) {
      const name = parseRepoName(repo);
      const sha = parseCommit(commit, name.repo);
      const base = path.join(runDir, `${sanitizeLabel(label)}-${randomBytes(4).toString('hex')}`);
      const checkout = path.join(base, 'repo');
      const scratch = path.join(base, 'scratch');
      await fs.mkdir(scratch, { recursive: true });
      const lock = repoLockPath(options.cacheDir, name);
      const lockOptions = { ...options.lock, signal: options.signal };
      let bare = '';
      try {
        bare = await withRepoLock(
          lock,
          async () => {
            const clone = await ensureBareCloneLocked(name, source, options.cacheDir, options);
            await ensureCommitLocked(name, sha, clone.path, source, options);
            await git(['worktree', 'add', '--quiet', '--detach', checkout, sha], { ...localOpts(clone.path, options, name), commit: sha });
            return clone.path;
          },
          lockOptions,
        );
        const head = (await git(['rev-parse', 'HEAD'], { ...localOpts(checkout, options, name), hardened: true })).trim();
        if (head !== sha) {
          throw new WorktreeError('git-failed', `fresh worktree for ${name.repo}@${sha} has HEAD ${head} (${checkout})`, {
            retryable: true,
            repo: name.repo,
            commit: sha,
          });
        }
      } catch (error) {
        if (bare) await withRepoLock(lock, () => removeWorktree(bare, checkout, name, options), lockOptions).catch(() => undefined);
        await fs.rm(base, { recursive: true, force: true });
        throw error;
      }
      let disposed = false;
      return {
        repo: name.repo,
        commit: sha,
        path: checkout,
        scratch,
        async dispose() {
          if (disposed) return;
          disposed = true;
          // Removal must not depend on the caller's (possibly aborted) signal.
          await withRepoLock(lock, () => removeWorktree(bare, checkout, name, { ...options, signal: undefined }), options.lock);
          await fs.rm(base, { recursive: true, force: true });
        },
      };
    },
  };
}
