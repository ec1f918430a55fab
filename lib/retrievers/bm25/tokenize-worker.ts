import { parentPort } from 'node:worker_threads';
import { BlobCounter } from './blob-counter';
import { TermTable } from './term-table';

/**
 * A tokenizer thread of tokenizer-pool.ts: receives a blob's bytes, answers its App. E term counts with the
 * terms as text (term ids are this thread's own). Its vocabulary starts afresh past VOCABULARY_LIMIT terms, so a
 * long run's memory stays bounded; the answers do not depend on it.
 */

export interface TokenizeRequest {
  id: number;
  bytes: Uint8Array;
}

export interface TokenizeAnswer {
  id: number;
  binary?: boolean;
  terms?: string;
  counts?: Int32Array;
  error?: string;
}

const VOCABULARY_LIMIT = 1 << 20;

let counter = new BlobCounter(new TermTable());
const port = parentPort;
if (!port) throw new Error('tokenize-worker.ts runs as a worker thread (tokenizer-pool.ts starts it)');
port.on('message', ({ id, bytes }: TokenizeRequest) => {
  let answer: TokenizeAnswer;
  try {
    if (counter.vocabulary.size > VOCABULARY_LIMIT) counter = new BlobCounter(new TermTable());
    const counted = counter.countAsText(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    answer = { id, ...counted };
  } catch (error) {
    answer = { id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
  }
  port.postMessage(answer, answer.counts ? [answer.counts.buffer as ArrayBuffer] : []);
});
