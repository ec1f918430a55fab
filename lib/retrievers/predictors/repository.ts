import path from 'node:path';
import type { EvaluationInstance } from '../../evaluation/instances';
import { BlobReader } from '../../worktrees/cat-file';
import { git } from '../../worktrees/git';
import { parseRepoName } from '../../worktrees/repo-name';

/**
 * BM25 and dense read an instance's files from its repository's object database (the bare clone the
 * environment stage made), never from a worktree. The git dir is the sample's `gitDir`; samples written before
 * that column existed give it through their worktree (`git rev-parse --git-common-dir`).
 */

const REV_PARSE_TIMEOUT_MS = 60_000;

export async function instanceGitDir(instance: EvaluationInstance): Promise<string | null> {
  if (instance.gitDir) return instance.gitDir;
  if (!instance.worktreePath) return null;
  const out = await git(['rev-parse', '--path-format=absolute', '--git-common-dir'], {
    cwd: instance.worktreePath,
    timeoutMs: REV_PARSE_TIMEOUT_MS,
  }).catch(() => null);
  return out === null ? null : out.trim();
}

export function noRepository(instance: EvaluationInstance): string {
  return `no repository for ${instance.repo}@${instance.baseCommit.slice(0, 12)}: the environment stage could not materialize it`;
}

/**
 * What a predictor keeps open for the repository it is on: a `git cat-file --batch` and whatever `open` adds
 * (the blob-keyed caches). Instances come sorted by repository, so moving to the next repository closes the
 * last one's: one process and one repository's cache at a time.
 */
export class RepositorySession<T> {
  private current: { gitDir: string; reader: BlobReader; value: Promise<T> } | null = null;

  constructor(
    private readonly open: (repoSlug: string, reader: BlobReader) => Promise<T>,
    private readonly release: (value: T) => Promise<void> = async () => undefined,
    private readonly signal?: AbortSignal,
  ) {}

  async get(instance: EvaluationInstance, gitDir: string): Promise<{ reader: BlobReader; value: T }> {
    if (this.current?.gitDir !== gitDir) {
      await this.close();
      const reader = new BlobReader(gitDir, this.signal ? { signal: this.signal } : {});
      this.current = { gitDir, reader, value: this.open(parseRepoName(instance.repo).slug, reader) };
    }
    return { reader: this.current.reader, value: await this.current.value };
  }

  async close(): Promise<void> {
    const last = this.current;
    this.current = null;
    if (!last) return;
    await last.reader.close();
    await last.value.then(this.release, () => undefined);
  }
}

/** `<dataDir>/<name>` beside `<dataDir>/embeddings`, the shared caches of every run. */
export function sharedCacheDir(embeddingCacheDir: string, name: string): string {
  return path.join(path.dirname(path.resolve(embeddingCacheDir)), name);
}
