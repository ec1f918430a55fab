import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRows } from '../artifacts';
import { parseInstanceRecord } from '../../schemas/instances';
import { repoRoot } from '../../test/support/repo-root';
import { git } from './git';
import { materializeAll } from './materialize';
import { buildMirrors } from './mirrors';

// Builds compact mirrors from the shared ones (../shared/repos, themselves compact mirrors of the demo's
// repositories) into a temp dir, the way an air-gapped cluster would from its own clones, then materializes
// worktrees from the new mirrors.
const SHARED_REPOS = path.resolve(repoRoot, '../shared/repos');
const WANTED = new Set(['mwaskom/seaborn', 'pylint-dev/pylint']);
let root: string;
let requests: { repo: string; commit: string }[];

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-mirrors-'));
  requests = [];
  for await (const record of readRows(path.join(repoRoot, 'data/sample/instances.jsonl'))) {
    const parsed = parseInstanceRecord(record);
    if (parsed.ok && WANTED.has(parsed.instance.repo)) requests.push({ repo: parsed.instance.repo, commit: parsed.instance.base_commit! });
  }
});
afterAll(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

describe('buildMirrors', () => {
  it('writes one shallow bare mirror per repository with each base commit under refs/commits/<sha>, usable as a mirror-dir', async () => {
    expect(requests).toHaveLength(5); // seaborn 2 + pylint 3
    const out = path.join(root, 'mirrors');
    const absent = { repo: 'acme/absent', commit: 'a'.repeat(40) };
    const results = await buildMirrors([...requests, absent], { outDir: out, source: { kind: 'mirror-dir', dir: SHARED_REPOS } });
    const byRepo = new Map(results.map((r) => [r.repo, r]));
    expect(byRepo.get('acme/absent')!.commits).toEqual([
      { commit: absent.commit, status: 'failed', error: expect.stringMatching(/no local mirror of acme\/absent/) },
    ]);
    for (const repo of WANTED) {
      const result = byRepo.get(repo)!;
      expect(result.commits.every((c) => c.status === 'fetched')).toBe(true);
      expect(result.path).toBe(path.join(out, `${repo.replace('/', '__')}.git`));
      const refs = (
        await git(['for-each-ref', '--format=%(refname) %(objectname)', 'refs/commits/'], { cwd: result.path, timeoutMs: 30_000 })
      )
        .trim()
        .split('\n');
      const wanted = requests.filter((r) => r.repo === repo).map((r) => `refs/commits/${r.commit} ${r.commit}`);
      expect(refs.sort()).toEqual(wanted.sort());
      // Exactly those commits, no history: each is a shallow boundary with no parent in the mirror.
      expect((await git(['rev-list', '--all', '--count'], { cwd: result.path, timeoutMs: 30_000 })).trim()).toBe(String(wanted.length));
      expect(result.bytes).toBeGreaterThan(100_000);
    }
    // Re-running fetches nothing new.
    const again = await buildMirrors(requests, { outDir: out, source: { kind: 'mirror-dir', dir: SHARED_REPOS } });
    expect(again.flatMap((r) => r.commits.map((c) => c.status))).toEqual(Array(5).fill('present'));

    const rows = await materializeAll(requests, {
      source: { kind: 'mirror-dir', dir: out },
      cacheDir: path.join(root, 'cache'),
      worktreesDir: path.join(root, 'worktrees'),
    });
    expect(rows.map((r) => r.status)).toEqual(Array(5).fill('created'));
    for (const row of rows) expect((await git(['rev-parse', 'HEAD'], { cwd: row.path, timeoutMs: 30_000 })).trim()).toBe(row.commit);
  }, 300_000);
});
