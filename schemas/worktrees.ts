import { Field, Float64, Schema, Utf8 } from 'apache-arrow';
import { z } from 'zod';

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
export const WorktreeResultSchema = z.object({
  repo: z.string().min(1),
  commit: z.string().min(1),
  /** Absolute worktree path; empty when the request was refused before a path could be derived. */
  path: z.string(),
  status: WorktreeStatusSchema,
  /** Time to make or verify the worktree (lock wait, clone/fetch when needed, add, checks), not counting the disk walk. */
  ms: z.number().nonnegative(),
  /** Disk bytes of the checkout (du-like, allocated blocks), excluding the shared bare repository. */
  bytes: z.number().nonnegative(),
  error: z.string().nullable(),
});
export type WorktreeResult = z.infer<typeof WorktreeResultSchema>;

export const WorktreeRequestSchema = z.object({ repo: z.string().min(1), commit: z.string().min(1) });
export type WorktreeRequest = z.infer<typeof WorktreeRequestSchema>;

export const WORKTREES_SCHEMA_NAME = 'worktrees';
export const WORKTREES_SCHEMA_VERSION = 1;

export const worktreesArrowSchema = new Schema(
  [
    new Field('repo', new Utf8(), false),
    new Field('commit', new Utf8(), false),
    new Field('path', new Utf8(), false),
    new Field('status', new Utf8(), false),
    new Field('ms', new Float64(), false),
    new Field('bytes', new Float64(), false),
    new Field('error', new Utf8(), true),
  ],
  new Map([
    ['schemaName', WORKTREES_SCHEMA_NAME],
    ['schemaVersion', String(WORKTREES_SCHEMA_VERSION)],
  ]),
);
