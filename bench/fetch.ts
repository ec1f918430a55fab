/**
 * Fetch-only-what-is-needed benchmark (the environment stage's URL path): per repository, an empty bare
 * repository plus `git fetch --depth=1 <url> <sha>` per base commit (lib/worktrees: ensureBareClone +
 * ensureCommitLocked), against a full `git clone --mirror` of the same URL (every ref, all history), both over file:// so no network
 * is needed. Bytes are the bare repository's disk usage (du-like), time is wall time.
 *
 *   npm run bench -- fetch          # ../shared/repos (or BENCH_MIRRORS_DIR) plus this project's own history
 *
 * What is compared: the mirrors in ../shared/repos are themselves shallow (exactly the demo's base commits), so
 * a "full clone" of one is the mirror itself; the rows `all base commits` therefore show the per-commit
 * fetch's overhead, the rows `one base commit` what a run needing fewer commits than a clone holds saves, and
 * the row `project history` (this repository's own git history, HEAD only) what depth 1 saves on a repository
 * with real history.
 */
import { promises as fs } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureBareClone, ensureCommitLocked } from '../lib/worktrees/bare-clone';
import { diskUsage } from '../lib/worktrees/disk-usage';
import { git } from '../lib/worktrees/git';
import { parseRepoName } from '../lib/worktrees/repo-name';

const GIT = { timeoutMs: 600_000 };
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const mirrorsDir = path.resolve(process.env.BENCH_MIRRORS_DIR ?? path.join(root, '../shared/repos'));

function emit(line: Record<string, unknown>): void {
  console.log(JSON.stringify({ bench: 'fetch', ...line }));
}

/** `dir` holds `<owner>__<name>.git`; the URL template the environment stage would be given for it. */
const templateFor = (dir: string) => `${pathToFileURL(dir).href}/{owner}__{name}.git`;

async function shallowFetch(template: string, repo: string, commits: string[], work: string) {
  const name = parseRepoName(repo);
  const cacheDir = path.join(work, 'shallow');
  const source = { kind: 'url' as const, template };
  const t0 = performance.now();
  const { path: bare } = await ensureBareClone(repo, source, cacheDir);
  for (const commit of commits) await ensureCommitLocked(name, commit, bare, source, {});
  const ms = performance.now() - t0;
  const bytes = await diskUsage(bare);
  await fs.rm(cacheDir, { recursive: true, force: true });
  return { ms, bytes };
}

async function fullClone(url: string, work: string) {
  const target = path.join(work, 'full.git');
  const t0 = performance.now();
  await git(['clone', '--mirror', '--quiet', '--no-local', url, target], GIT);
  const ms = performance.now() - t0;
  const bytes = await diskUsage(target);
  await fs.rm(target, { recursive: true, force: true });
  return { ms, bytes };
}

async function compare(label: string, repo: string, dir: string, commits: string[]) {
  const work = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-bench-fetch-'));
  try {
    const shallow = await shallowFetch(templateFor(dir), repo, commits, work);
    const full = await fullClone(`${pathToFileURL(dir).href}/${parseRepoName(repo).slug}.git`, work);
    emit({
      repo,
      case: label,
      commits: commits.length,
      shallow_bytes: shallow.bytes,
      shallow_ms: Math.round(shallow.ms),
      full_clone_bytes: full.bytes,
      full_clone_ms: Math.round(full.ms),
      bytes_ratio_full_over_shallow: Math.round((full.bytes / shallow.bytes) * 100) / 100,
      time_ratio_full_over_shallow: Math.round((full.ms / shallow.ms) * 100) / 100,
    });
    return { shallow, full };
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

const totals = { shallow: 0, full: 0 };
for (const entry of (await fs.readdir(mirrorsDir)).filter((e) => e.endsWith('.git')).sort()) {
  const mirror = path.join(mirrorsDir, entry);
  const repo = entry.replace(/\.git$/, '').replace('__', '/');
  const commits = (await git(['for-each-ref', '--format=%(objectname)', 'refs/commits/'], { ...GIT, cwd: mirror }))
    .trim()
    .split('\n')
    .filter(Boolean);
  const all = await compare('all base commits', repo, mirrorsDir, commits);
  totals.shallow += all.shallow.bytes;
  totals.full += all.full.bytes;
  await compare('one base commit', repo, mirrorsDir, commits.slice(0, 1));
}
emit({ case: 'all base commits, every repository', shallow_bytes: totals.shallow, full_clone_bytes: totals.full });

const ownGit = path.resolve(root, (await git(['rev-parse', '--git-common-dir'], { ...GIT, cwd: root })).trim());
const head = (await git(['rev-parse', 'HEAD'], { ...GIT, cwd: root })).trim();
const commitCount = Number((await git(['rev-list', '--count', 'HEAD'], { ...GIT, cwd: root })).trim());
emit({ note: `project history: ${commitCount} commits` });
const linkDir = await fs.mkdtemp(path.join(tmpdir(), 'codegrep-bench-fetch-own-'));
await fs.symlink(ownGit, path.join(linkDir, 'codegrep__codegrep.git'));
try {
  await compare('project history, HEAD only', 'codegrep/codegrep', linkDir, [head]);
} finally {
  await fs.rm(linkDir, { recursive: true, force: true });
}
