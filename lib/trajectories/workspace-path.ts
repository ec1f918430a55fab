import { normalizeRepoPath } from '../paths/normalize';

/**
 * OpenHands mounts the instance's repository at `/workspace/<owner>__<name>__<version>/` (CodeGrep App. A.2:
 * "auto-detect the repository prefix (/workspace/owner__repo__commit/)"). A viewed path is mapped back to a
 * repository-relative path, checked against the row's `repo` column.
 */
export const WORKSPACE_ROOT = '/workspace';

export type WorkspacePath =
  | { kind: 'inRepo'; relativePath: string; workspaceDir: string }
  /** Not under any `/workspace/<owner>__<name>__<version>/` (e.g. `/workspace/reproduce.py`, a relative path). */
  | { kind: 'outsideRepo' }
  /** Under a workspace checkout, but of another repository than the row's. */
  | { kind: 'repoMismatch'; workspaceDir: string };

const CHECKOUT_DIR = /^[^/]+__[^/]+__[^/]+$/;

/**
 * `relativePath` is normalised by lib/paths (`.`/`..` resolved, duplicate and trailing slashes dropped); it is
 * '' for the checkout root itself. A `..` that climbs out of the checkout makes the path `outsideRepo`.
 */
export function resolveWorkspacePath(rawPath: string, repo: string): WorkspacePath {
  const absolute = normalizeRepoPath(rawPath);
  const prefix = `${WORKSPACE_ROOT}/`;
  if (!absolute.startsWith(prefix)) return { kind: 'outsideRepo' };
  const rest = absolute.slice(prefix.length);
  const slash = rest.indexOf('/');
  const workspaceDir = slash < 0 ? rest : rest.slice(0, slash);
  const relativePath = slash < 0 ? '' : rest.slice(slash + 1);
  // GitHub names are case-insensitive; the checkout directory may not use the column's spelling.
  const expected = `${repo.replace('/', '__')}__`.toLowerCase();
  if (workspaceDir.toLowerCase().startsWith(expected) && workspaceDir.length > expected.length) {
    return { kind: 'inRepo', relativePath, workspaceDir };
  }
  return CHECKOUT_DIR.test(workspaceDir) ? { kind: 'repoMismatch', workspaceDir } : { kind: 'outsideRepo' };
}
