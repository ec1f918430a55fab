import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CountedBlob } from './blob-counter';
import type { TokenizeAnswer } from './tokenize-worker';

/**
 * Threads that tokenize blobs for the BM25 term store (CodeGrep App. E), so a cold index uses every core: the
 * caller keeps reading blobs (`git cat-file --batch`) and interning the answers while the threads count terms.
 * Each thread runs blob-counter.ts, the code the caller's thread runs when there is no pool, and answers the
 * terms as text, so what the store keeps does not depend on which thread counted a blob.
 *
 * The threads run TypeScript through tsx like the rest of the code: the bootstrap registers tsx's loader in the
 * thread (a worker does not inherit the loader hooks of its parent), then imports tokenize-worker.ts.
 */

/** Threads of the default pool: one per core, at most this many. */
export const MAX_TOKENIZER_THREADS = 4;

export function defaultTokenizerThreads(): number {
  return Math.min(availableParallelism(), MAX_TOKENIZER_THREADS);
}

const here = fileURLToPath(import.meta.url);
const WORKER_MODULE = pathToFileURL(path.join(path.dirname(here), `tokenize-worker${path.extname(here)}`)).href;
/** tsx's ESM `register` (its package exports' `./esm/api` import entry). */
const TSX_API = (() => {
  const manifest = createRequire(import.meta.url).resolve('tsx/package.json');
  const exports = (JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, { import: { default: string } }> }).exports;
  return pathToFileURL(path.join(path.dirname(manifest), exports['./esm/api']!.import.default)).href;
})();
const BOOTSTRAP = `
import { workerData } from 'node:worker_threads';
const { register } = await import(workerData.tsx);
register();
await import(workerData.module);
`;

interface Pending {
  resolve: (counted: CountedBlob) => void;
  reject: (error: Error) => void;
}

interface Thread {
  worker: Worker;
  pending: Map<number, Pending>;
}

export class TokenizerPool {
  private readonly threads: Thread[] = [];
  private nextId = 0;
  private failure: Error | null = null;
  private closed = false;

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`TokenizerPool: size must be a positive integer, got ${size}`);
    for (let t = 0; t < size; t++) this.threads.push(this.start());
  }

  private start(): Thread {
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(BOOTSTRAP)}`), {
      workerData: { module: WORKER_MODULE, tsx: TSX_API },
    });
    const thread: Thread = { worker, pending: new Map() };
    worker.unref();
    worker.on('message', (answer: TokenizeAnswer) => {
      const request = thread.pending.get(answer.id);
      if (!request) return;
      thread.pending.delete(answer.id);
      if (thread.pending.size === 0) worker.unref();
      if (answer.error !== undefined) request.reject(new Error(`BM25 tokenizer thread: ${answer.error}`));
      else request.resolve({ binary: answer.binary!, terms: answer.terms!, counts: answer.counts! });
    });
    const fail = (error: Error) => {
      this.failure ??= error;
      for (const p of thread.pending.values()) p.reject(error);
      thread.pending.clear();
    };
    worker.on('error', (error) => fail(new Error(`BM25 tokenizer thread failed: ${error.message}`)));
    worker.on('exit', (code) => {
      if (!this.closed) fail(new Error(`BM25 tokenizer thread exited with code ${code}`));
    });
    return thread;
  }

  /** A thread died: every later request fails (sharedTokenizerPool then starts a new pool). */
  get failed(): boolean {
    return this.failure !== null;
  }

  /** The term counts of a blob's bytes (copied to the thread; the caller keeps `bytes`). */
  count(bytes: Uint8Array): Promise<CountedBlob> {
    if (this.closed) return Promise.reject(new Error('TokenizerPool: closed'));
    if (this.failure) return Promise.reject(this.failure);
    // The thread with the fewest blobs waiting.
    let thread = this.threads[0]!;
    for (const t of this.threads) if (t.pending.size < thread.pending.size) thread = t;
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      if (thread.pending.size === 0) thread.worker.ref();
      thread.pending.set(id, { resolve, reject });
      thread.worker.postMessage({ id, bytes });
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const thread of this.threads) {
      for (const p of thread.pending.values()) p.reject(new Error('TokenizerPool: closed'));
      thread.pending.clear();
    }
    await Promise.all(this.threads.map((t) => t.worker.terminate()));
  }
}

let shared: TokenizerPool | null = null;

/**
 * The process's pool of `defaultTokenizerThreads()` threads, started on first use and kept (its idle threads
 * do not keep the process alive), replaced when one of its threads has died, so a long-lived worker process
 * recovers; null where there is one core, where blobs are tokenized in the caller's thread.
 */
export function sharedTokenizerPool(): TokenizerPool | null {
  if (defaultTokenizerThreads() < 2) return null;
  if (shared?.failed) void shared.close();
  if (!shared || shared.failed) shared = new TokenizerPool(defaultTokenizerThreads());
  return shared;
}
