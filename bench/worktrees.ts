/**
 * Worktree materialization benchmark (§3.3: "per-rollout setup completes in milliseconds", disk
 * repo_size + N · worktree_size instead of N · repo_size). Not run in CI.
 *
 *   BENCH_REPO_DIR=/path/to/clone-or-bare  tsx bench/worktrees.ts   # a real repository
 *   tsx bench/worktrees.ts                                         # a synthetic one (2,000 files, 30 commits)
 *
 * Env: BENCH_COMMITS (default 20, at least 20 for a real repository), BENCH_FULL_CLONES (reference full
 * clones to time, default 3), BENCH_KEEP=1 keeps the temp dir. Prints JSON lines; two references run in the
 * same invocation and are reported as ratios: plain `git worktree add` (our locking + verification overhead)
 * and one full `git clone --no-hardlinks` + checkout per commit (what the shared bare clone saves).
 */
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { diskSummary } from '../lib/worktrees/disk-summary';
import { diskUsage } from '../lib/worktrees/disk-usage';
import { git } from '../lib/worktrees/git';
import { materializeAll } from '../lib/worktrees/materialize';
import { createSyntheticRepo } from '../lib/worktrees/synthetic-repo';

const REPO = 'bench/repo';
const GIT = { timeoutMs: 600_000 };

function emit(line: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'worktrees', ...line }));
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[i]!;
}

function timing(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b);
  const r = (x: number) => Math.round(x * 10) / 10;
  return { n: s.length, median_ms: r(quantile(s, 0.5)), p95_ms: r(quantile(s, 0.95)), max_ms: r(s.at(-1) ?? NaN) };
}

/** Commits spread evenly over the first-parent history of HEAD, newest first. */
async function pickCommits(repoDir: string, n: number): Promise<string[]> {
  const all = (await git(['rev-list', '--first-parent', 'HEAD'], { ...GIT, cwd: repoDir })).trim().split('\n').filter(Boolean);
  if (all.length <= n) return all;
  const step = all.length / n;
  return Array.from({ length: n }, (_, i) => all[Math.floor(i * step)]!);
}

export async function runWorktreesBench(): Promise<void> {
  const work = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-bench-wt-'));
  try {
    let repoDir = process.env.BENCH_REPO_DIR;
    let wanted = Number(process.env.BENCH_COMMITS ?? 20);
    if (repoDir) {
      repoDir = path.resolve(repoDir);
      wanted = Math.max(20, wanted);
      emit({ phase: 'source', kind: 'real', dir: repoDir });
    } else {
      const t0 = performance.now();
      const synthetic = await createSyntheticRepo(path.join(work, 'synthetic'), { files: 2000, commits: 30, linesPerFile: 30 });
      repoDir = synthetic.dir;
      wanted = Math.max(wanted, 30);
      emit({
        phase: 'source',
        kind: 'synthetic',
        note: 'no BENCH_REPO_DIR given: a synthetic repository of 2,000 files and 30 commits was built',
        files: 2000,
        commits: 30,
        build_ms: Math.round(performance.now() - t0),
      });
    }
    const commits = await pickCommits(repoDir, wanted);
    // The source is offered as a local mirror (a symlink named like one), the offline layout.
    const mirrors = path.join(work, 'mirrors');
    await fs.mkdir(mirrors, { recursive: true });
    await fs.symlink(repoDir, path.join(mirrors, 'bench__repo.git'));
    const opts = {
      cacheDir: path.join(work, 'cache'),
      worktreesDir: path.join(work, 'worktrees'),
      source: { kind: 'mirror-dir' as const, dir: mirrors },
    };
    const requests = commits.map((commit) => ({ repo: REPO, commit }));

    const tCold = performance.now();
    const cold = await materializeAll(requests, opts);
    const coldMs = performance.now() - tCold;
    const failed = cold.filter((r) => r.status === 'failed');
    if (failed.length > 0) emit({ phase: 'errors', failed: failed.map((r) => ({ commit: r.commit, error: r.error })) });
    const created = cold.filter((r) => r.status === 'created');
    // The first row also paid for the bare clone; report it apart.
    emit({ phase: 'first (bare clone + add)', ms: Math.round(created[0]?.ms ?? NaN) });
    emit({ phase: 'add', ...timing(created.slice(1).map((r) => r.ms)), total_ms: Math.round(coldMs) });

    // Reference: plain `git worktree add` on the same bare clone, without our locking and verification.
    const bare = path.join(opts.cacheDir, 'bench__repo.git');
    const rawMs: number[] = [];
    for (const [i, commit] of commits.slice(0, Math.min(10, commits.length)).entries()) {
      const t0 = performance.now();
      await git(['worktree', 'add', '--quiet', '--detach', path.join(work, 'raw', String(i)), commit], { ...GIT, cwd: bare });
      rawMs.push(performance.now() - t0);
    }
    const raw = timing(rawMs);
    emit({
      phase: 'reference: raw git worktree add',
      ...raw,
      overhead_ratio_ensure_over_raw: Math.round((timing(created.slice(1).map((r) => r.ms)).median_ms / raw.median_ms) * 100) / 100,
    });
    await fs.rm(path.join(work, 'raw'), { recursive: true, force: true });
    await git(['worktree', 'prune'], { ...GIT, cwd: bare });

    const warm = await materializeAll(requests, opts);
    emit({ phase: 'reuse (verify)', ...timing(warm.filter((r) => r.status === 'reused').map((r) => r.ms)) });

    const disk = await diskSummary(opts);
    emit({
      phase: 'disk',
      worktrees: disk.worktrees,
      bare_bytes: disk.bareBytes,
      worktree_bytes: disk.worktreeBytes,
      shared_total_bytes: disk.bareBytes + disk.worktreeBytes,
      estimated_full_clones_bytes: disk.estimatedFullClonesBytes,
      saved_ratio: Math.round(disk.savedRatio * 1000) / 1000,
    });

    // Reference: real full clones (no hard links, so each pays for its own objects) checked out at a commit.
    const k = Math.min(Number(process.env.BENCH_FULL_CLONES ?? 3), commits.length);
    const fullMs: number[] = [];
    let fullBytes = 0;
    for (let i = 0; i < k; i++) {
      const dir = path.join(work, 'full', String(i));
      const t0 = performance.now();
      await git(['clone', '--quiet', '--no-hardlinks', '--no-checkout', repoDir, dir], GIT);
      await git(['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', commits[i]!], { ...GIT, cwd: dir });
      fullMs.push(performance.now() - t0);
      fullBytes += await diskUsage(dir);
      await fs.rm(dir, { recursive: true, force: true });
    }
    const full = timing(fullMs);
    const perClone = k > 0 ? fullBytes / k : NaN;
    const add = timing(created.slice(1).map((r) => r.ms));
    emit({
      phase: 'reference: full clone + checkout',
      ...full,
      bytes_per_clone: Math.round(perClone),
      measured_n_full_clones_bytes: Math.round(perClone * disk.worktrees),
      time_ratio_full_clone_over_add: Math.round((full.median_ms / add.median_ms) * 10) / 10,
      disk_ratio_full_clones_over_shared: Math.round(((perClone * disk.worktrees) / (disk.bareBytes + disk.worktreeBytes)) * 10) / 10,
    });
  } finally {
    if (process.env.BENCH_KEEP === '1') emit({ phase: 'kept', dir: work });
    else await fs.rm(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  runWorktreesBench().catch((e: unknown) => {
    console.error(e);
    process.exitCode = 1;
  });
}
