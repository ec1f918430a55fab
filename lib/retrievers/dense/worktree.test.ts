import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../artifacts/read-parquet';
import { manifestPathFor } from '../../artifacts/manifest';
import { chunkSpans } from './chunking';
import { buildDenseIndex, type DenseIndex } from './dense-index';
import {
  contentWindow,
  embedTokenSequences,
  loadEmbeddingModel,
  releaseEmbeddingModel,
  wrapTokens,
  type EmbeddingModel,
} from './embedding-model';
import { denseScores, retrieveDense } from './retrieve';
import { fixtureModel } from '../../../test/fixtures/retrievers/dense-fixture';
import { indexWorktreeDense } from './worktree';

// A real git worktree of Python files, indexed with the real fixture model (max_seq_length 32, so a file of
// a few lines already spans several chunks) and a real Parquet cache.

const FILES: Record<string, string> = {
  'pkg/__init__.py': '',
  'pkg/models.py': 'class Author(models.Model):\n    name = models.CharField()\n',
  'pkg/views.py': 'def index(request):\n    return render(request, "index.html")\n',
  'pkg/query.py': 'def filter(self, *args, **kwargs):\n    return self._chain()\n',
  'pkg/long_module.py': Array.from({ length: 30 }, (_, i) => `def helper_${i}(value):\n    return value + ${i}\n`).join('\n'),
  'tests/test_models.py': 'import numpy as np\nfrom pkg.models import Author\n',
  // Outside the App. E corpus: never indexed.
  'venv/lib/site.py': 'def index(request): pass\n',
  'pkg/__pycache__/models.py': 'class Author: pass\n',
  'build/lib/pkg/models.py': 'class Author: pass\n',
  'README.md': '# a readme, not Python\n',
};
const INDEXED = ['pkg/__init__.py', 'pkg/long_module.py', 'pkg/models.py', 'pkg/query.py', 'pkg/views.py', 'tests/test_models.py'];

let tmp: string;
let root: string;
let commit: string;
let model: EmbeddingModel;

function git(...args: string[]): string {
  return execFileSync('git', args, { cwd: root, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' } }).trim();
}

beforeAll(async () => {
  const fixture = await fixtureModel('tiny');
  model = await loadEmbeddingModel(fixture.modelDir, { batchSize: 4 });
  tmp = await mkdtemp(path.join(os.tmpdir(), 'dense-worktree-'));
  root = path.join(tmp, 'repo');
  for (const [file, content] of Object.entries(FILES)) {
    await mkdir(path.dirname(path.join(root, file)), { recursive: true });
    await writeFile(path.join(root, file), content);
  }
  git('init', '-q');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'fixture');
  commit = git('rev-parse', 'HEAD');
}, 600_000);

afterAll(async () => {
  if (model) await releaseEmbeddingModel(model);
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function chunkVectors(index: DenseIndex, file: string): Float32Array[] {
  const f = index.paths.indexOf(file);
  const out: Float32Array[] = [];
  for (let c = 0; c < index.chunkFile.length; c++) {
    if (index.chunkFile[c] === f) out.push(index.embeddings.slice(c * index.dimension, (c + 1) * index.dimension));
  }
  return out;
}

describe('indexWorktreeDense', () => {
  it('indexes the App. E corpus of the worktree, through the BM25 walker', async () => {
    const index = await indexWorktreeDense(root, commit, model);
    expect(index.paths).toEqual(INDEXED);
    expect(index.stats).toMatchObject({ files: INDEXED.length, embeddedFiles: INDEXED.length, cachedFiles: 0, cache: null });
    expect(index.dimension).toBe(32);
    const withoutTests = await indexWorktreeDense(root, commit, model, { includeTests: false });
    expect(withoutTests.paths).toEqual(INDEXED.filter((p) => !p.startsWith('tests/')));
  });

  it('cuts a long file into overlapping token windows, each embedded as its own sequence', async () => {
    const index = await indexWorktreeDense(root, commit, model);
    const ids = model.tokenizer.encode(FILES['pkg/long_module.py']!);
    const window = contentWindow(model, 'document');
    const overlap = Math.floor(window / 8);
    const spans = chunkSpans(ids.length, window, overlap);
    expect(spans.length).toBeGreaterThan(5);
    const f = index.paths.indexOf('pkg/long_module.py');
    expect(index.chunkSpans.filter((_, c) => index.chunkFile[c] === f)).toEqual(spans);
    const direct = await embedTokenSequences(
      model,
      spans.map((s) => wrapTokens(model, ids.slice(s.start, s.end), 'document')),
    );
    chunkVectors(index, 'pkg/long_module.py').forEach((v, i) => {
      for (let d = 0; d < v.length; d++) expect(Math.abs(v[d]! - direct[i]![d]!)).toBeLessThan(1e-5);
    });
    expect(index.stats.chunks).toBe(INDEXED.length - 1 + spans.length);
    // maxChunksPerFile keeps the file's first chunks.
    const capped = await indexWorktreeDense(root, commit, model, { maxChunksPerFile: 2 });
    expect(capped.chunkSpans.filter((_, c) => capped.chunkFile[c] === f)).toEqual(spans.slice(0, 2));
  });
});

describe('retrieveDense', () => {
  it('ranks first the file whose content is the query, with cosine 1', async () => {
    const index = await indexWorktreeDense(root, commit, model);
    for (const file of ['pkg/models.py', 'pkg/views.py', 'pkg/query.py', 'tests/test_models.py']) {
      const [best, second] = await retrieveDense(index, FILES[file]!, 3);
      expect(best!.path).toBe(file);
      expect(Math.abs(best!.score - 1)).toBeLessThan(1e-5);
      expect(second!.score).toBeLessThan(best!.score - 1e-4);
    }
  });

  it('scores a file by its best chunk', async () => {
    const index = await indexWorktreeDense(root, commit, model);
    const ids = model.tokenizer.encode(FILES['pkg/long_module.py']!);
    const spans = index.chunkSpans.filter((_, c) => index.chunkFile[c] === index.paths.indexOf('pkg/long_module.py'));
    const last = spans.at(-1)!;
    // A query that IS the last chunk: the long file scores 1 through that chunk.
    const [query] = await embedTokenSequences(model, [wrapTokens(model, ids.slice(last.start, last.end), 'query')]);
    const { scores, bestChunk } = denseScores(index, query!);
    const f = index.paths.indexOf('pkg/long_module.py');
    expect(Math.abs(scores[f]! - 1)).toBeLessThan(1e-5);
    expect(index.chunkSpans[bestChunk[f]!]).toEqual(last);
    // Every file's score is the maximum of its chunks' cosines.
    const q = query!;
    index.paths.forEach((_, file) => {
      let best = -Infinity;
      for (let c = 0; c < index.chunkFile.length; c++) {
        if (index.chunkFile[c] !== file) continue;
        let dot = 0;
        let nc = 0;
        let nq = 0;
        for (let d = 0; d < index.dimension; d++) {
          dot += q[d]! * index.embeddings[c * index.dimension + d]!;
          nc += index.embeddings[c * index.dimension + d]! ** 2;
          nq += q[d]! ** 2;
        }
        best = Math.max(best, dot / Math.sqrt(nc * nq));
      }
      expect(Math.abs(scores[file]! - best)).toBeLessThan(1e-9);
    });
  });

  it('returns min(K, files) files by descending score, K = 2 by default, and reports the best chunk', async () => {
    const index = await indexWorktreeDense(root, commit, model);
    const top = await retrieveDense(index, 'def helper_29(value): return value + 29');
    expect(top).toHaveLength(2);
    expect(top.map((r) => r.rank)).toEqual([1, 2]);
    const all = await retrieveDense(index, 'def helper_29(value): return value + 29', 100);
    expect(all).toHaveLength(INDEXED.length);
    for (let i = 1; i < all.length; i++) expect(all[i]!.score).toBeLessThanOrEqual(all[i - 1]!.score);
    const long = all.find((r) => r.path === 'pkg/long_module.py')!;
    expect(long.chunk.tokenEnd).toBeGreaterThan(long.chunk.tokenStart);
    await expect(retrieveDense(index, 'x', 0)).rejects.toThrow(/k must be a positive integer/);
    const empty = await buildDenseIndex([], commit, model);
    expect(await retrieveDense(empty, 'anything')).toEqual([]);
  });

  it('refuses duplicate and empty paths', async () => {
    await expect(
      buildDenseIndex(
        [
          { path: 'a.py', content: 'x' },
          { path: './a.py', content: 'y' },
        ],
        commit,
        model,
      ),
    ).rejects.toThrow(/"a.py" appears twice/);
    await expect(buildDenseIndex([{ path: '', content: 'x' }], commit, model)).rejects.toThrow(/empty path/);
  });
});

describe('the Parquet embedding cache', () => {
  it('writes the commit once, reads it back with no inference, and re-embeds exactly the changed files', async () => {
    const cacheDir = path.join(tmp, 'cache-main');
    const first = await indexWorktreeDense(root, commit, model, { cacheDir });
    expect(first.stats.cache).toMatchObject({ read: 'missing', written: true });
    const cacheFile = first.stats.cache!.path;
    expect(path.basename(cacheFile)).toBe(`${commit}.parquet`);
    expect(JSON.parse(await readFile(manifestPathFor(cacheFile), 'utf8'))).toMatchObject({
      schema: 'dense-embeddings',
      rows: first.stats.chunks,
    });
    const rows = await readParquetObjects(cacheFile);
    expect(rows).toHaveLength(first.stats.chunks);
    expect(rows[0]).toMatchObject({ path: 'pkg/__init__.py', chunk: 0, token_start: 0, token_end: 0 });
    expect((rows[0]!['embedding'] as number[]).length).toBe(32);

    const runs = model.stats.sessionRuns;
    const second = await indexWorktreeDense(root, commit, model, { cacheDir });
    expect(model.stats.sessionRuns).toBe(runs); // no inference at all
    expect(second.stats).toMatchObject({ embeddedFiles: 0, cachedFiles: INDEXED.length, cache: { read: 'read', written: false } });
    expect(second.embeddings).toEqual(first.embeddings);
    expect(second.chunkSpans).toEqual(first.chunkSpans);
    expect((await retrieveDense(second, FILES['pkg/views.py']!))[0]!.path).toBe('pkg/views.py');

    // Same commit, one file edited in the worktree: only that file is embedded again.
    await writeFile(path.join(root, 'pkg/views.py'), 'def detail(request, pk):\n    return get_object_or_404(Author, pk=pk)\n');
    try {
      const before = model.stats.sessionRuns;
      const third = await indexWorktreeDense(root, commit, model, { cacheDir });
      expect(third.stats).toMatchObject({ embeddedFiles: 1, cachedFiles: INDEXED.length - 1, cache: { read: 'read', written: true } });
      expect(model.stats.sessionRuns - before).toBe(1);
      const fresh = await indexWorktreeDense(root, commit, model);
      expect(chunkVectors(third, 'pkg/views.py')).toEqual(chunkVectors(fresh, 'pkg/views.py'));
      expect(chunkVectors(third, 'pkg/views.py')).not.toEqual(chunkVectors(first, 'pkg/views.py'));
      expect(chunkVectors(third, 'pkg/models.py')).toEqual(chunkVectors(first, 'pkg/models.py'));
      const reread = await indexWorktreeDense(root, commit, model, { cacheDir });
      expect(reread.stats).toMatchObject({ embeddedFiles: 0, cache: { written: false } });
    } finally {
      await writeFile(path.join(root, 'pkg/views.py'), FILES['pkg/views.py']!);
    }

    // A file deleted: nothing to embed, but the cache is rewritten without it.
    await unlink(path.join(root, 'pkg/query.py'));
    try {
      const fewer = await indexWorktreeDense(root, commit, model, { cacheDir });
      expect(fewer.stats).toMatchObject({ files: INDEXED.length - 1, cache: { written: true } });
      expect((await readParquetObjects(cacheFile)).some((r) => r['path'] === 'pkg/query.py')).toBe(false);
    } finally {
      await writeFile(path.join(root, 'pkg/query.py'), FILES['pkg/query.py']!);
    }
  });

  it('keeps commits and chunk settings apart', async () => {
    const cacheDir = path.join(tmp, 'cache-keys');
    const a = await indexWorktreeDense(root, commit, model, { cacheDir });
    const otherCommit = await indexWorktreeDense(root, 'f'.repeat(40), model, { cacheDir });
    expect(otherCommit.stats).toMatchObject({ embeddedFiles: INDEXED.length, cache: { read: 'missing' } });
    expect(path.dirname(otherCommit.stats.cache!.path)).toBe(path.dirname(a.stats.cache!.path));
    const otherOverlap = await indexWorktreeDense(root, commit, model, { cacheDir, chunkOverlap: 0 });
    expect(otherOverlap.stats).toMatchObject({ embeddedFiles: INDEXED.length, cache: { read: 'missing' } });
    expect(path.dirname(otherOverlap.stats.cache!.path)).not.toBe(path.dirname(a.stats.cache!.path));
    await expect(indexWorktreeDense(root, '../escape', model, { cacheDir })).rejects.toThrow(/commit "..\/escape" is not a commit id/);
  });

  it('checkpoints during a long run, so an interrupted run resumes with the files already embedded', async () => {
    const cacheDir = path.join(tmp, 'cache-checkpoint');
    const interrupted = indexWorktreeDense(root, commit, model, {
      cacheDir,
      filesPerGroup: 2,
      checkpointSeconds: 0,
      onProgress: ({ filesDone }) => {
        if (filesDone >= 4) throw new Error('worker lost');
      },
    });
    await expect(interrupted).rejects.toThrow('worker lost');
    const resumed = await indexWorktreeDense(root, commit, model, { cacheDir, filesPerGroup: 2 });
    // Checkpoints were written after the first and second groups (4 files); the run died before the third.
    expect(resumed.stats).toMatchObject({ cachedFiles: 4, embeddedFiles: INDEXED.length - 4, cache: { read: 'read', written: true } });
    const fresh = await indexWorktreeDense(root, commit, model);
    expect(resumed.embeddings).toEqual(fresh.embeddings);
    const progress: number[] = [];
    await indexWorktreeDense(root, commit, model, { cacheDir, onProgress: ({ filesDone }) => progress.push(filesDone) });
    expect(progress).toEqual([INDEXED.length]);
  });

  it('treats an unreadable cache file as absent and replaces it', async () => {
    const cacheDir = path.join(tmp, 'cache-corrupt');
    const first = await indexWorktreeDense(root, commit, model, { cacheDir });
    const cacheFile = first.stats.cache!.path;
    const size = (await stat(cacheFile)).size;
    await writeFile(cacheFile, Buffer.alloc(size, 7));
    const recovered = await indexWorktreeDense(root, commit, model, { cacheDir });
    expect(recovered.stats).toMatchObject({ embeddedFiles: INDEXED.length, cache: { read: 'unreadable', written: true } });
    expect(recovered.stats.cache!.reason).toMatch(/not a Parquet file/);
    expect(recovered.embeddings).toEqual(first.embeddings);
    const after = await indexWorktreeDense(root, commit, model, { cacheDir });
    expect(after.stats).toMatchObject({ embeddedFiles: 0, cache: { read: 'read' } });
  });
});
