import { listTree } from '../../worktrees/cat-file';
import { DEFAULT_MAX_FILE_BYTES, INDEXED_EXTENSIONS, SKIPPED_DIRECTORIES, TEST_DIRECTORIES } from './params';
import type { SkippedFile, WorktreeScanOptions } from './worktree';

/**
 * The corpus of CodeGrep App. E read from a commit's tree in the bare repository instead of a checkout: the same
 * files `collectWorktreeFiles` (worktree.ts) would index in a fresh worktree of that commit, by the same rules,
 * in the same order. From `git ls-tree -r -l`:
 *
 * - a blob whose name ends with an indexed extension, none of whose directories is a skipped one (App. E
 *   "Corpus"; tests/ and test/ too when tests are excluded) is a candidate;
 * - a symbolic link (mode 120000) named like one is skipped as `symlink`; a submodule (a `commit` entry) is an
 *   empty directory in a worktree, so nothing;
 * - a blob over `maxFileBytes` is skipped as `too-large` by its listed size, without reading it;
 * - whether a candidate is binary (a NUL in its first 8000 bytes) needs its bytes: the caller decides it when
 *   it reads the blob (or finds the answer cached by blob id).
 *
 * Paths are sorted in JavaScript string order, as the worktree walk sorts them. One difference from a
 * checkout remains by design: checkout filters (`.gitattributes` eol=crlf, ident) are not applied, so a file
 * is indexed as committed; CR is whitespace to the App. E tokenizer, so BM25 sees the same tokens.
 */

export interface CommitFile {
  path: string;
  blob: string;
  size: number;
}

export interface CommitFiles {
  commit: string;
  /** Candidates in insertion (tie-break) order. */
  files: CommitFile[];
  /** Skipped by listing alone (symlink, too-large), by path. */
  skipped: SkippedFile[];
  /** Entries of the whole tree (every file of the commit, indexed or not). */
  listed: number;
}

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

export async function listCommitFiles(
  gitDir: string,
  commit: string,
  opts: Pick<WorktreeScanOptions, 'includeTests' | 'extensions' | 'maxFileBytes'> & { signal?: AbortSignal } = {},
): Promise<CommitFiles> {
  const includeTests = opts.includeTests ?? true;
  const extensions = opts.extensions ?? INDEXED_EXTENSIONS;
  const maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const skippedDirectories = new Set(SKIPPED_DIRECTORIES);
  if (!includeTests) for (const d of TEST_DIRECTORIES) skippedDirectories.add(d);

  const entries = await listTree(gitDir, commit, opts.signal ? { signal: opts.signal } : {});
  const files: CommitFile[] = [];
  const skipped: SkippedFile[] = [];
  for (const entry of entries) {
    const parts = entry.path.split('/');
    const name = parts[parts.length - 1]!;
    if (!extensions.some((e) => name.endsWith(e))) continue;
    if (parts.slice(0, -1).some((d) => skippedDirectories.has(d))) continue;
    if (entry.type !== 'blob') continue;
    if (entry.mode === '120000') skipped.push({ path: entry.path, reason: 'symlink' });
    else if (entry.size !== null && entry.size > maxFileBytes)
      skipped.push({ path: entry.path, reason: 'too-large', detail: `${entry.size} bytes > ${maxFileBytes}` });
    else files.push({ path: entry.path, blob: entry.oid, size: entry.size ?? 0 });
  }
  files.sort((a, b) => compare(a.path, b.path));
  skipped.sort((a, b) => compare(a.path, b.path));
  return { commit, files, skipped, listed: entries.length };
}

/**
 * Parts a commit's listed files into its documents (in their order) and the files skipped: the listing's own,
 * and each one `isBinary` says is not text, by path.
 */
export function separateBinaryFiles(
  files: readonly CommitFile[],
  listingSkipped: readonly SkippedFile[],
  isBinary: (f: CommitFile) => boolean,
): { documents: CommitFile[]; skipped: SkippedFile[] } {
  const skipped = [...listingSkipped];
  const documents = files.filter((f) => {
    if (!isBinary(f)) return true;
    skipped.push({ path: f.path, reason: 'binary' });
    return false;
  });
  skipped.sort((a, b) => compare(a.path, b.path));
  return { documents, skipped };
}
