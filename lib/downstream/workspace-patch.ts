import { git } from '../worktrees/git';

/** Local git commands on one checkout. */
const GIT_TIMEOUT_MS = 120_000;

/**
 * The agent's change as one patch: every tracked change and every new file that .gitignore does not exclude
 * (`git add -A`), diffed against the base commit (`git diff --cached <base>`). Prefixes are pinned to
 * `a/`/`b/` whatever the user's git config says (diff.noprefix, mnemonicPrefix), `--binary` keeps binary
 * edits appliable, and no external diff driver or colour can leak in. An untouched checkout gives ''.
 */
export async function workspacePatch(checkout: string, baseCommit: string, signal?: AbortSignal): Promise<string> {
  const opts = { cwd: checkout, timeoutMs: GIT_TIMEOUT_MS, ...(signal ? { signal } : {}) };
  await git(['add', '-A'], opts);
  return git(
    [
      '-c', 'diff.noprefix=false',
      '-c', 'diff.mnemonicPrefix=false',
      '-c', 'core.quotePath=true',
      'diff', '--cached', '--binary', '--no-color', '--no-ext-diff', '--no-renames',
      '--src-prefix=a/', '--dst-prefix=b/',
      baseCommit, '--',
    ],
    opts,
  );
}
