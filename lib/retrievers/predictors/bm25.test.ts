import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EvaluationInstance } from '../../evaluation/instances';
import { git } from '../../worktrees/git';
import { bareMirror, createSyntheticRepo, type SyntheticRepo } from '../../worktrees/synthetic-repo';
import { retrieveTopK } from '../bm25/retriever';
import { indexWorktree } from '../bm25/worktree';
import { bm25Predictor } from './bm25';

/** The BM25 predictor of the evaluation reads the commit from the bare repository: no worktree needed. */

let root: string;
let repo: SyntheticRepo;
let bare: string;

beforeAll(async () => {
  root = mkdtempSync(path.join(tmpdir(), 'bm25-predictor-'));
  repo = await createSyntheticRepo(path.join(root, 'work'), { files: 30, commits: 4 });
  bare = await bareMirror(repo.dir, path.join(root, 'acme__widgets.git'));
}, 60_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const truth = { goldFiles: [], targetFiles: [], lineRanges: [], modules: [], functions: [] };
const instance = (commit: string, where: { gitDir: string | null; worktreePath: string | null }, query: string): EvaluationInstance => ({
  instanceId: `acme__widgets-${commit.slice(0, 6)}-${query.length}`,
  repo: 'acme/widgets',
  baseCommit: commit,
  problemStatement: query,
  truth,
  ...where,
});

describe('bm25Predictor', () => {
  it('ranks from the bare repository alone as BM25 ranks a checkout, and keeps term counts by blob in the data dir', async () => {
    const retriever = { name: 'bm25', kind: 'bm25' as const, k: 2, excludeTests: false };
    const dataDir = path.join(root, 'data');
    const predictor = bm25Predictor(retriever, {
      signal: new AbortController().signal,
      embeddingCacheDir: path.join(dataDir, 'embeddings'),
      env: {},
    });
    try {
      for (const [i, commit] of repo.commits.entries()) {
        const query = `compute_${i * 7} total revision ${i} module_${i + 3}`;
        const prediction = await predictor.predict(instance(commit, { gitDir: bare, worktreePath: null }, query));
        await git(['checkout', '--quiet', commit], { cwd: repo.dir, timeoutMs: 30_000 });
        const expected = retrieveTopK(await indexWorktree(repo.dir), query, prediction.ranked!.length).map((r) => r.path);
        expect(prediction.error).toBeNull();
        expect(prediction.ranked).toEqual(expected);
        expect(prediction.files).toEqual(expected.slice(0, 2));
      }
      // A sample written before `gitDir` existed: the bare repository is found through its worktree.
      const checkout = path.join(root, 'checkout');
      await git(['-C', bare, 'worktree', 'add', '--quiet', '--detach', checkout, repo.commits[1]!], { timeoutMs: 30_000 });
      const viaWorktree = await predictor.predict(instance(repo.commits[1]!, { gitDir: null, worktreePath: checkout }, 'compute_7 total'));
      expect(viaWorktree.error).toBeNull();
      expect(viaWorktree.files).toHaveLength(2);
      const none = await predictor.predict(instance(repo.commits[1]!, { gitDir: null, worktreePath: null }, 'x'));
      expect(none.error).toMatch(/no repository for acme\/widgets@/);
    } finally {
      await predictor.close();
    }
    const segments = readdirSync(path.join(dataDir, 'bm25-terms'), { recursive: true }).filter((f) => String(f).endsWith('.parquet'));
    expect(segments.length).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('told its shard (upcoming), lists the next commit ahead and predicts exactly what it predicts one by one', async () => {
    const retriever = { name: 'bm25', kind: 'bm25' as const, k: 2, excludeTests: false };
    // Two instances on each commit, then a commit the repository lacks: its failure stays its own.
    const shard = [...repo.commits, ...repo.commits]
      .sort()
      .map((commit, i) => instance(commit, { gitDir: bare, worktreePath: null }, `compute_${i} total module_${i}`));
    shard.push(instance('f'.repeat(40), { gitDir: bare, worktreePath: null }, 'compute_1'));
    const predict = async (withUpcoming: boolean) => {
      const predictor = bm25Predictor(retriever, {
        signal: new AbortController().signal,
        embeddingCacheDir: path.join(root, `ahead-${withUpcoming}`),
        env: {},
      });
      if (withUpcoming) predictor.upcoming!(shard);
      try {
        const out = [];
        for (const i of shard) out.push(await predictor.predict(i));
        return out.map((p) => ({ id: p.instanceId, ranked: p.ranked, files: p.files, error: p.error }));
      } finally {
        await predictor.close();
      }
    };
    const ahead = await predict(true);
    expect(ahead).toEqual(await predict(false));
    expect(ahead.slice(0, -1).every((p) => p.error === null && p.files.length === 2)).toBe(true);
    expect(ahead.at(-1)!.error).toMatch(/not a tree object|ls-tree/);
  }, 60_000);
});
