import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fixtureModel } from '../../../test/fixtures/retrievers/dense-fixture';
import { BlobReader } from '../../worktrees/cat-file';
import { git } from '../../worktrees/git';
import { bareMirror, commitFiles } from '../../worktrees/synthetic-repo';
import { BlobEmbeddingStore, blobEmbeddingsSettingsHash } from './blob-embeddings';
import { indexCommitDense, type DenseCommitIndex, type DenseEmbeddingProgress } from './commit-index';
import { chunkSettings } from './dense-index';
import { loadEmbeddingModel, releaseEmbeddingModel, type EmbeddingModel } from './embedding-model';
import { retrieveDense } from './retrieve';
import { indexWorktreeDense } from './worktree';

/**
 * The dense index of a commit read from the bare repository with chunk embeddings keyed by blob id: the
 * documents of a checkout, the rankings of a from-scratch build, and a second commit that shares most blobs
 * embeds only its new ones (the real tiny fixture model, max_seq_length 32, so files span several chunks).
 */

const T = { timeoutMs: 60_000 };
const module = (i: number, version = 0): string =>
  Array.from({ length: 6 }, (_, l) => `def helper_${i}_${l}(value):\n    return value * ${l} + ${version}  # module ${i}\n`).join('\n');
const QUERIES = ['helper value return', 'module 3 helper_3_2', 'class Author models', 'value * 4 + 1'];

let root: string;
let work: string;
let bare: string;
let first: string;
let second: string;
let model: EmbeddingModel;

beforeAll(async () => {
  model = await loadEmbeddingModel((await fixtureModel('tiny')).modelDir, { batchSize: 4 });
  root = mkdtempSync(path.join(tmpdir(), 'dense-commit-'));
  work = path.join(root, 'work');
  await git(['init', '--quiet', '--initial-branch=main', work], T);
  const files: Record<string, string> = {};
  for (let i = 0; i < 12; i++) files[`pkg/mod_${i}.py`] = module(i);
  files['pkg/models.py'] = 'class Author(models.Model):\n    name = models.CharField()\n';
  files['pkg/__init__.py'] = '';
  files['tests/test_models.py'] = 'from pkg.models import Author\n';
  files['build/lib/pkg/models.py'] = 'class Author: pass\n';
  files['pkg/blob.py'] = 'MAGIC\u0000\u0001binary';
  files['README.md'] = '# not Python\n';
  first = await commitFiles(work, files, 'first');
  second = await commitFiles(work, { 'pkg/mod_3.py': module(3, 1), 'pkg/new.py': module(99), 'docs/x.rst': 'x' }, 'second');
  bare = await bareMirror(work, path.join(root, 'bare.git'));
}, 300_000);

afterAll(async () => {
  await releaseEmbeddingModel(model);
  rmSync(root, { recursive: true, force: true });
});

async function rankings(index: DenseCommitIndex): Promise<string[][]> {
  return Promise.all(QUERIES.map(async (q) => (await retrieveDense(index, q, 10)).map((h) => h.path)));
}

describe('indexCommitDense: dense retrieval from the bare repository, embeddings keyed by blob id', () => {
  it('embeds only the second commit’s new blobs, ranks as a from-scratch build, and reuses the segments', async () => {
    const settings = chunkSettings(model, {});
    const hash = blobEmbeddingsSettingsHash(model, settings);
    const dir = path.join(root, 'emb');
    const reader = new BlobReader(bare);
    try {
      const store = await BlobEmbeddingStore.open(dir, hash, model.dimension);
      const progress: DenseEmbeddingProgress[] = [];
      const a = await indexCommitDense(store, reader, model, settings, first, { onProgress: (p) => progress.push(p), blobsPerGroup: 4 });
      // 12 modules + models + __init__ + test + blob.py (sniffed binary, marked, not embedded)
      expect(a.stats.embedded).toBe(16);
      expect(a.stats.documents).toBe(15);
      expect(a.skipped).toEqual([{ path: 'pkg/blob.py', reason: 'binary' }]);
      expect(progress.at(-1)).toMatchObject({ done: 16, total: 16 });
      expect(progress.some((p) => p.etaSeconds !== null && p.done < p.total)).toBe(true);

      const b = await indexCommitDense(store, reader, model, settings, second);
      expect(b.stats.embedded).toBe(2); // mod_3 changed, new.py added; README and docs are not documents
      expect(b.stats.cached).toBe(15);

      // The checkout's corpus, embedded from scratch (the per-commit path): same documents, same rankings.
      await git(['checkout', '--quiet', second], { ...T, cwd: work });
      const scratch = await indexWorktreeDense(work, second, model, {});
      expect(b.paths).toEqual(scratch.paths);
      expect(await rankings(b)).toEqual(await rankings({ ...scratch, skipped: [], stats: b.stats }));
      for (let i = 0; i < b.embeddings.length; i++) expect(Math.abs(b.embeddings[i]! - scratch.embeddings[i]!)).toBeLessThan(1e-5);

      const reopened = await BlobEmbeddingStore.open(dir, hash, model.dimension);
      expect(reopened.size).toBe(18);
      const again = await indexCommitDense(reopened, reader, model, settings, second);
      expect(again.stats.embedded).toBe(0);
      expect(Buffer.from(again.embeddings.buffer).equals(Buffer.from(b.embeddings.buffer))).toBe(true);

      // The BM25 prefilter: only the given paths are documents, still through the store (nothing new to embed).
      const only = await indexCommitDense(reopened, reader, model, settings, second, { only: new Set(['pkg/new.py', 'pkg/models.py']) });
      expect(only.paths).toEqual(['pkg/models.py', 'pkg/new.py']);
      expect(only.stats.embedded).toBe(0);
    } finally {
      await reader.close();
    }
  }, 300_000);

  it('another chunking never reads the stored vectors', () => {
    const a = blobEmbeddingsSettingsHash(model, chunkSettings(model, {}));
    expect(blobEmbeddingsSettingsHash(model, chunkSettings(model, { maxChunksPerFile: 2 }))).not.toBe(a);
    expect(blobEmbeddingsSettingsHash(model, chunkSettings(model, { chunkOverlap: 0 }))).not.toBe(a);
  });
});
