import { promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';
import { isGitComponent } from '../sandbox/paths';
import { git } from '../worktrees/git';

/** Local git commands on one checkout. */
const GIT_TIMEOUT_MS = 120_000;

/**
 * Every entry named `.git` (any case, any type: directory, file, symlink) below the checkout's root, the
 * root's own `.git` excepted. Symlinked directories are not entered.
 */
export async function nestedGitEntries(checkout: string): Promise<string[]> {
  const found: string[] = [];
  const walk = async (dir: string, atRoot: boolean): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (isGitComponent(entry.name)) {
        if (!atRoot) found.push(full);
        continue;
      }
      if (entry.isDirectory()) await walk(full, false);
    }
  };
  await walk(checkout, true);
  return found;
}

/**
 * The agent's change as one patch: every tracked change and every new file that .gitignore does not exclude
 * (`git add -A`), diffed against the base commit (`git diff --cached <base>`). Prefixes are pinned to
 * `a/`/`b/` whatever the user's git config says (diff.noprefix, mnemonicPrefix), `--binary` keeps binary
 * edits appliable, and no external diff driver, textconv or colour can leak in. An untouched checkout gives ''.
 *
 * The checkout's files are agent-written, so git runs hardened (lib/worktrees/git.ts: no fsmonitor, no
 * hooks, no system/global config, discovery stopped at the checkout). A nested `.git` (which an outside
 * agent could write; the built-in editor refuses it) is deleted first: git can never put such a path in a
 * patch, and left there it makes `git add -A` treat its directory as an embedded repository, which drops
 * that directory's files or fails the whole add. The checkout is throwaway, so nothing of value is lost.
 */
export async function workspacePatch(checkout: string, baseCommit: string, signal?: AbortSignal): Promise<string> {
  for (const entry of await nestedGitEntries(checkout)) await fs.rm(entry, { recursive: true, force: true });
  const opts = { cwd: checkout, timeoutMs: GIT_TIMEOUT_MS, hardened: true, ...(signal ? { signal } : {}) };
  await git(['add', '-A'], opts);
  return git(
    [
      '-c',
      'diff.noprefix=false',
      '-c',
      'diff.mnemonicPrefix=false',
      '-c',
      'core.quotePath=true',
      'diff',
      '--cached',
      '--binary',
      '--no-color',
      '--no-ext-diff',
      '--no-textconv',
      '--no-renames',
      '--src-prefix=a/',
      '--dst-prefix=b/',
      baseCommit,
      '--',
    ],
    opts,
  );
}
