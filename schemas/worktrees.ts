import { z } from 'zod';
import { columns, float64, nullable, utf8 } from './columns';

/**
 * Where bare clones come from.
 * - `url`: a git URL template; `{repo}` is replaced by `owner/name`, `{owner}` and `{name}` by the parts.
 * - `mirror-dir`: a directory of local bare mirrors, one per repository, named `<dir>/<owner>__<name>.git`
 *   (preferred) or `<dir>/<owner>/<name>.git`. Lets offline users and tests work without network.
 */
export const RepoSourceSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('url'),
    template: z
      .string()
      .min(1)
      .refine((t) => t.includes('{repo}') || (t.includes('{owner}') && t.includes('{name}')), {
        message: 'a repository URL template must contain {repo}, or both {owner} and {name}',
      }),
  }),
  z.object({ kind: z.literal('mirror-dir'), dir: z.string().min(1) }),
]);
export type RepoSource = z.infer<typeof RepoSourceSchema>;

export const DEFAULT_REPO_SOURCE: RepoSource = { kind: 'url', template: 'https://github.com/{repo}.git' };

/** The config key users set to point the environment at local mirrors; named in unreachable-repo errors. */
export const REPO_SOURCE_CONFIG_KEY = 'environment.repoSource';

export const WorktreeStatusSchema = z.enum(['created', 'reused', 'repaired', 'failed']);
export type WorktreeStatus = z.infer<typeof WorktreeStatusSchema>;

/** One materialized (repo, commit): a row of the `worktrees` artifact. `error` is set only when status is `failed`. */
export const worktreeColumns = columns({
  repo: utf8(z.string().min(1)),
  commit: utf8(z.string().min(1)),
  /** Absolute worktree path; empty when the request was refused before a path could be derived. */
  path: utf8(),
  status: utf8(WorktreeStatusSchema),
  /** Time to make or verify the worktree (lock wait, clone/fetch when needed, add, checks), not counting the disk walk. */
  ms: float64(z.number().nonnegative()),
  /** Disk bytes of the checkout (du-like, allocated blocks), excluding the shared bare repository. */
  bytes: float64(z.number().nonnegative()),
  error: nullable(utf8()),
  /** What kind of failure (`mirror-missing`, `repo-unreachable`, `patch-failed`, …): a name to count drops by. */
  errorCode: nullable(utf8()),
  /** For a `use_patch` request: the sha256 of the bug patch applied (null otherwise). */
  bugPatchSha256: nullable(utf8()),
  /** For a `use_patch` request: the repository head the patch was applied to; `commit` is the patched commit. */
  patchedFrom: nullable(utf8()),
});
export const WorktreeResultSchema = worktreeColumns.zod;
export type WorktreeResult = z.infer<typeof WorktreeResultSchema>;

/**
 * One tree to materialize: `repo` at `commit`, or, with `bugPatch` (CodeScout's `use_patch` instances), the
 * repository's head with the patch applied; `commit` is then HEAD_COMMIT until the head is resolved.
 */
export const WorktreeRequestSchema = z.object({
  repo: z.string().min(1),
  commit: z.string().min(1),
  bugPatch: z.object({ sha256: z.string().regex(/^[0-9a-f]{64}$/), text: z.string().min(1) }).optional(),
});
export type WorktreeRequest = z.infer<typeof WorktreeRequestSchema>;

/** The `commit` of a request (and of its failed row) for the repository's head, resolved when materialized. */
export const HEAD_COMMIT = 'HEAD';

/**
 * The identity of a requested tree, shared by samples, requests and result rows: `owner/name@<commit>`, or for
 * a use_patch tree `owner/name@HEAD+<patch sha256>` (its head is resolved once per repository and pinned).
 */
export function treeKey(
  t: { repo: string; bugPatchSha256?: string | null } & ({ commit: string } | { baseCommit: string | null }),
): string {
  if (t.bugPatchSha256) return `${t.repo}@${HEAD_COMMIT}+${t.bugPatchSha256}`;
  return `${t.repo}@${'commit' in t ? t.commit : (t.baseCommit ?? '')}`;
}

export const WORKTREES_SCHEMA_NAME = 'worktrees';
/** 2: errorCode, bugPatchSha256, patchedFrom. */
export const WORKTREES_SCHEMA_VERSION = 2;

export const worktreesArrowSchema = worktreeColumns.arrowSchema({
  schemaName: WORKTREES_SCHEMA_NAME,
  schemaVersion: String(WORKTREES_SCHEMA_VERSION),
});
