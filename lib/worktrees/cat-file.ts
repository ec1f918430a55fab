import { startProcessGroup, type ProcessGroup } from '../process';
import { WorktreeError } from './errors';
import { git, gitEnv, lastLines } from './git';

/**
 * Reading a repository's files straight from its object database, with no checkout: the tree of a commit
 * (`git ls-tree -r -z -l`) and blob contents through ONE long-lived `git cat-file --batch` per repository
 * (git help cat-file, "BATCH OUTPUT"): a request is the object id and a newline; the answer is
 * `<oid> SP <type> SP <size> LF <contents> LF`, or `<oid> SP missing LF`. Answers come in request order, so
 * requests can be pipelined: `readBlobs` keeps a bounded window of them in flight.
 */

export interface TreeEntry {
  /** Octal mode as git prints it: 100644 / 100755 files, 120000 symbolic links, 160000 submodules. */
  mode: string;
  /** blob, tree or commit (a submodule). */
  type: string;
  oid: string;
  /** Bytes of a blob; null for a submodule. */
  size: number | null;
  /** Repository-relative path, exactly as stored (UTF-8). */
  path: string;
}

const LS_TREE_TIMEOUT_MS = 120_000;

/** Every entry of `commit`'s tree, recursively (blobs, symbolic links, submodules; no trees). */
export async function listTree(gitDir: string, commit: string, opts: { signal?: AbortSignal } = {}): Promise<TreeEntry[]> {
  const out = await git(['-C', gitDir, 'ls-tree', '-r', '-z', '-l', '--full-tree', commit], {
    timeoutMs: LS_TREE_TIMEOUT_MS,
    ...(opts.signal ? { signal: opts.signal } : {}),
    commit,
  });
  const entries: TreeEntry[] = [];
  for (const record of out.split('\0')) {
    if (record === '') continue;
    const tab = record.indexOf('\t');
    const fields = record
      .slice(0, tab)
      .split(' ')
      .filter((f) => f !== '');
    if (tab < 0 || fields.length !== 4)
      throw new WorktreeError('git-failed', `git ls-tree ${commit} in ${gitDir}: unexpected line ${JSON.stringify(record.slice(0, 200))}`, {
        retryable: false,
        commit,
      });
    const [mode, type, oid, size] = fields as [string, string, string, string];
    entries.push({ mode, type, oid, size: size === '-' ? null : Number(size), path: record.slice(tab + 1) });
  }
  return entries;
}

type Pending = { oid: string; resolve: (blob: Buffer | null) => void; reject: (error: Error) => void };

/** One `git cat-file --batch` on a repository; `read` may be called many times before earlier reads resolve. */
export class BlobReader {
  private readonly group: ProcessGroup;
  private readonly pending: Pending[] = [];
  /** Bytes received and not yet handed out. */
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** The header of the answer being received, once its line has arrived. */
  private body: { size: number; missing: boolean } | null = null;
  private failure: Error | null = null;
  private stderr = '';
  /** Blobs read and their bytes, for the caller's statistics. */
  blobsRead = 0;
  bytesRead = 0;

  constructor(
    readonly gitDir: string,
    opts: { signal?: AbortSignal } = {},
  ) {
    this.group = startProcessGroup('git', ['-C', gitDir, 'cat-file', '--batch'], {
      env: gitEnv(),
      stdin: { pipe: true },
      stdout: (chunk) => this.receive(chunk),
      stderr: (chunk) => {
        if (this.stderr.length < 64 * 1024) this.stderr += chunk.toString('utf8');
      },
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    void this.group.exited.then(({ code, stoppedFor, spawnError }) => {
      const why = spawnError
        ? `could not run git: ${spawnError.message}`
        : stoppedFor
          ? `stopped (${stoppedFor})`
          : `exited with code ${code}: ${lastLines(this.stderr)}`;
      this.fail(
        new WorktreeError(stoppedFor === 'abort' ? 'aborted' : 'git-failed', `git cat-file --batch in ${gitDir} ${why}`, {
          retryable: true,
        }),
      );
    });
  }

  /** The contents of blob `oid`; null when the repository has no such object. */
  read(oid: string): Promise<Buffer | null> {
    if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(oid))
      return Promise.reject(new RangeError(`BlobReader: ${JSON.stringify(oid)} is not an object id`));
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.pending.push({ oid, resolve, reject });
      this.group.input!.write(`${oid}\n`);
    });
  }

  /** Ends the process (after the answers already asked for) and waits for it. */
  async close(): Promise<void> {
    this.group.input?.end();
    await this.group.exited;
  }

  private fail(error: Error): void {
    this.failure ??= error;
    for (const p of this.pending.splice(0)) p.reject(this.failure);
  }

  /** The first `n` buffered bytes, removed from the buffer; copies only the chunks that hold them. */
  private take(n: number): Buffer {
    let covered = 0;
    let count = 0;
    while (covered < n) covered += this.chunks[count++]!.length;
    const taken = count === 1 ? this.chunks[0]! : Buffer.concat(this.chunks.slice(0, count), covered);
    const rest = taken.subarray(n);
    this.chunks.splice(0, count, ...(rest.length > 0 ? [rest] : []));
    this.buffered -= n;
    return taken.subarray(0, n);
  }

  /** Offset of the first newline in the buffer, or −1. */
  private newlineOffset(): number {
    let offset = 0;
    for (const chunk of this.chunks) {
      const at = chunk.indexOf(0x0a);
      if (at >= 0) return offset + at;
      offset += chunk.length;
    }
    return -1;
  }

  private receive(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (this.body === null) {
        const newline = this.newlineOffset();
        if (newline < 0) return;
        const line = this.take(newline + 1).toString('utf8', 0, newline);
        const fields = line.split(' ');
        const request = this.pending[0];
        if (request === undefined || fields[0] !== request.oid) {
          this.fail(
            new WorktreeError(
              'git-failed',
              `git cat-file --batch in ${this.gitDir}: unexpected answer ${JSON.stringify(line.slice(0, 200))}`,
              { retryable: false },
            ),
          );
          this.group.stop('protocol error');
          return;
        }
        if (fields[1] === 'missing') {
          this.pending.shift()!.resolve(null);
          continue;
        }
        this.body = { size: Number(fields[2]), missing: false };
      }
      if (this.buffered < this.body.size + 1) return;
      const content = Buffer.from(this.take(this.body.size + 1).subarray(0, this.body.size));
      this.body = null;
      this.blobsRead++;
      this.bytesRead += content.length;
      this.pending.shift()!.resolve(content);
    }
  }
}

/**
 * Reads `oids` through `reader` with at most `window` requests in flight, calling `onBlob` in order (awaited,
 * so a slow consumer holds the reading back and memory stays bounded by the window).
 */
export async function readBlobs(
  reader: BlobReader,
  oids: readonly string[],
  onBlob: (oid: string, content: Buffer | null, index: number) => void | Promise<void>,
  window = 64,
): Promise<void> {
  const inFlight: Promise<Buffer | null>[] = [];
  let asked = 0;
  for (let i = 0; i < oids.length; i++) {
    while (asked < oids.length && asked < i + window) {
      const request = reader.read(oids[asked++]!);
      request.catch(() => undefined); // a failure is thrown where it is awaited, not reported as unhandled
      inFlight.push(request);
    }
    const content = await inFlight.shift()!;
    await onBlob(oids[i]!, content, i);
  }
}
