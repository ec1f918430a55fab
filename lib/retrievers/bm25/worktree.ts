import { open, opendir, realpath } from 'node:fs/promises';
import path from 'node:path';
import { BINARY_SNIFF_BYTES, DEFAULT_MAX_FILE_BYTES, INDEXED_EXTENSIONS, SKIPPED_DIRECTORIES, TEST_DIRECTORIES } from './params';
import { buildBm25Index, type Bm25Index, type Bm25Options, type SourceFile } from './retriever';

/**
 * The corpus of CodeGrep App. E: a worktree's Python files, walking every directory except the skipped ones
 * (__pycache__, venv, .venv, env, build, dist, .eggs, and .git), at any depth; test directories
 * (tests/, test/) are included unless `includeTests` is false (App. E's `--include_tests` default).
 *
 * Files are inserted in ascending order of their repository-relative path (JavaScript string order), so the
 * tie-break order of the retriever does not depend on the file system's listing order.
 * Symbolic links are never followed (nothing outside the worktree is read, no cycle is possible); a link
 * named like an indexed file is reported in `skipped`. Also skipped and reported: files over `maxFileBytes`
 * (generated tables and vendored blobs, not application code), files with a NUL byte in their first 8000 bytes (binary, git's heuristic), and files
 * that cannot be read. Text is decoded as UTF-8; invalid bytes become U+FFFD, which the tokenizer strips.
 */

export interface WorktreeScanOptions {
  /** Index tests/ and test/ directories (default true). */
  includeTests?: boolean;
  /** File-name endings to index (default ['.py']). */
  extensions?: readonly string[];
  maxFileBytes?: number;
  /** Files read at once (default 16). */
  concurrency?: number;
}

export type SkipReason = 'symlink' | 'too-large' | 'binary' | 'unreadable';

export interface SkippedFile {
  path: string;
  reason: SkipReason;
  detail?: string;
}

export interface WorktreeFiles {
  root: string;
  files: SourceFile[];
  skipped: SkippedFile[];
}

export interface WorktreeIndex extends Bm25Index {
  root: string;
  skipped: SkippedFile[];
}

async function listCandidates(
  root: string,
  opts: Required<Pick<WorktreeScanOptions, 'includeTests' | 'extensions'>>,
  skipped: SkippedFile[],
): Promise<string[]> {
  const skippedDirectories = new Set(SKIPPED_DIRECTORIES);
  if (!opts.includeTests) for (const d of TEST_DIRECTORIES) skippedDirectories.add(d);
  const found: string[] = [];
  const walk = async (relative: string): Promise<void> => {
    const directory = await opendir(path.join(root, relative));
    for await (const entry of directory) {
      const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isSymbolicLink()) {
        if (opts.extensions.some((e) => entry.name.endsWith(e))) skipped.push({ path: child, reason: 'symlink' });
      } else if (entry.isDirectory()) {
        if (!skippedDirectories.has(entry.name)) await walk(child);
      } else if (entry.isFile() && opts.extensions.some((e) => entry.name.endsWith(e))) {
        found.push(child);
      }
    }
  };
  await walk('');
  return found.sort();
}

type ReadResult = { ok: true; content: string } | { ok: false; reason: SkipReason; detail?: string };

async function readSourceFile(absolute: string, maxFileBytes: number): Promise<ReadResult> {
  let handle;
  try {
    handle = await open(absolute, 'r');
    const { size } = await handle.stat();
    if (size > maxFileBytes) return { ok: false, reason: 'too-large', detail: `${size} bytes > ${maxFileBytes}` };
    const bytes = await handle.readFile();
    const sniff = bytes.subarray(0, BINARY_SNIFF_BYTES);
    if (sniff.includes(0)) return { ok: false, reason: 'binary' };
    return { ok: true, content: bytes.toString('utf8') };
  } catch (error) {
    return { ok: false, reason: 'unreadable', detail: (error as Error).message };
  } finally {
    await handle?.close();
  }
}

/** The files App. E indexes under `root`, read, in insertion order, with what was skipped and why. */
export async function collectWorktreeFiles(root: string, opts: WorktreeScanOptions = {}): Promise<WorktreeFiles> {
  const includeTests = opts.includeTests ?? true;
  const extensions = opts.extensions ?? INDEXED_EXTENSIONS;
  const maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const concurrency = opts.concurrency ?? 16;
  const resolvedRoot = await realpath(root).catch((error: Error) => {
    throw new Error(`indexWorktree: cannot open worktree root ${JSON.stringify(root)}: ${error.message}`);
  });
  const skipped: SkippedFile[] = [];
  const candidates = await listCandidates(resolvedRoot, { includeTests, extensions }, skipped);
  const results = new Array<ReadResult>(candidates.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < candidates.length) {
      const i = next++;
      results[i] = await readSourceFile(path.join(resolvedRoot, candidates[i]!), maxFileBytes);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, candidates.length)) }, worker));
  const files: SourceFile[] = [];
  candidates.forEach((relative, i) => {
    const result = results[i]!;
    if (result.ok) files.push({ path: relative, content: result.content });
    else skipped.push({ path: relative, reason: result.reason, ...(result.detail === undefined ? {} : { detail: result.detail }) });
  });
  skipped.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { root: resolvedRoot, files, skipped };
}

/** Reads the worktree (see `collectWorktreeFiles`) and builds its BM25 index, to be queried many times. */
export async function indexWorktree(root: string, opts: WorktreeScanOptions & Bm25Options = {}): Promise<WorktreeIndex> {
  const { root: resolvedRoot, files, skipped } = await collectWorktreeFiles(root, opts);
  return { ...buildBm25Index(files, opts), root: resolvedRoot, skipped };
}
