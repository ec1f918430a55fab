/**
 * Why materializing a worktree failed. `retryable` tells the caller (a Temporal activity) whether running the
 * same request again with the same configuration can succeed: a typo'd repository, a missing local mirror or
 * an unreachable host will not fix themselves, a lock held by a slow peer or a git timeout may.
 */
export type WorktreeErrorCode =
  | 'bad-repo-name'
  | 'bad-commit'
  | 'bad-source'
  | 'repo-unreachable'
  | 'commit-missing'
  | 'no-head'
  | 'patch-failed'
  | 'git-failed'
  | 'git-timeout'
  | 'lock-timeout'
  | 'aborted';

export class WorktreeError extends Error {
  override readonly name = 'WorktreeError';
  readonly code: WorktreeErrorCode;
  readonly retryable: boolean;
  readonly repo: string | undefined;
  readonly commit: string | undefined;
  /** A finer name than `code` for counting failures, e.g. `mirror-missing` for a `repo-unreachable` mirror dir. */
  readonly reason: string;

  constructor(
    code: WorktreeErrorCode,
    message: string,
    opts: { retryable: boolean; repo?: string; commit?: string; cause?: unknown; reason?: string },
  ) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.code = code;
    this.reason = opts.reason ?? code;
    this.retryable = opts.retryable;
    this.repo = opts.repo;
    this.commit = opts.commit;
  }
}

export function isWorktreeError(e: unknown): e is WorktreeError {
  return e instanceof WorktreeError;
}

/** The name a failure is counted under: the WorktreeError's reason, `error` for anything else. */
export function errorCode(e: unknown): string {
  return e instanceof WorktreeError ? e.reason : 'error';
}

export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
