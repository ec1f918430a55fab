import { promises as fs } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { HEAD_COMMIT, type RepoSource, type WorktreeRequest } from '../../schemas/worktrees';
import { diskUsage } from './disk-usage';
import { errorMessage } from './errors';
import { git, lastLines, runGit } from './git';
import { parseCommit, parseRepoName, type RepoName } from './repo-name';
import { parseRepoSource, resolveRemote } from './repo-source';

/**
 * Compact bare mirrors for air-gapped clusters: per repository `<outDir>/<owner>__<name>.git`, a shallow bare
 * repository holding exactly the requested commits, each under `refs/commits/<sha>` (so it stays reachable and
 * is advertised to any fetch). Such a folder is an `environment.repoSource: { kind: mirror-dir, dir }`.
 *
 * Per repository: `git init --bare`, then per commit `git fetch --depth=1 <source> <sha>:refs/commits/<sha>`,
 * then `git gc --aggressive --prune=now`. A local source is served with `uploadpack.allowAnySHA1InWant`, so
 * any commit of it can be asked for, advertised or not; GitHub serves any reachable commit by id anyway.
 * Re-running adds only the commits a mirror lacks. A commit or repository that cannot be fetched is reported
 * in its row and the others go on.
 */

export interface MirrorCommitResult {
  commit: string;
  status: 'fetched' | 'present' | 'failed';
  error: string | null;
}

export interface MirrorRepoResult {
  repo: string;
  path: string;
  source: string;
  commits: MirrorCommitResult[];
  /** Disk bytes of the mirror after gc. */
  bytes: number;
  ms: number;
}

export interface BuildMirrorsOptions {
  outDir: string;
  /** Where commits come from: a URL template (GitHub by default) or a folder of local clones / mirrors. */
  source: RepoSource;
  timeoutMs?: number;
  /** Skip `git gc --aggressive` (faster, bigger). */
  skipGc?: boolean;
  onRepo?: (result: MirrorRepoResult) => void;
}

const DEFAULT_TIMEOUT_MS = 600_000;

/**
 * A request whose commit is HEAD_COMMIT (CodeScout's use_patch instances: the repository's head + a patch) adds
 * the source's head, one commit deep, as the mirror's `main` branch and HEAD; once there it is kept (the head is
 * pinned, so every instance of the repository is patched onto the same commit).
 */
export async function buildMirrors(requests: readonly WorktreeRequest[], opts: BuildMirrorsOptions): Promise<MirrorRepoResult[]> {
  const source = parseRepoSource(opts.source);
  const byRepo = new Map<string, { name: RepoName; commits: Set<string> }>();
  for (const request of requests) {
    const name = parseRepoName(request.repo);
    const commit = request.commit === HEAD_COMMIT ? HEAD_COMMIT : parseCommit(request.commit, name.repo);
    const entry = byRepo.get(name.repo) ?? { name, commits: new Set<string>() };
    entry.commits.add(commit);
    byRepo.set(name.repo, entry);
  }
  await fs.mkdir(opts.outDir, { recursive: true });
  const results: MirrorRepoResult[] = [];
  for (const { name, commits } of byRepo.values()) {
    const result = await buildOneMirror(name, [...commits], source, opts);
    opts.onRepo?.(result);
    results.push(result);
  }
  return results;
}

async function buildOneMirror(repo: RepoName, commits: string[], source: RepoSource, opts: BuildMirrorsOptions): Promise<MirrorRepoResult> {
  const started = performance.now();
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const target = path.join(path.resolve(opts.outDir), `${repo.slug}.git`);
  let url: string;
  try {
    const remote = await resolveRemote(repo, source);
    // A folder is fetched through file:// so that --depth is honoured (a plain path would be a local copy).
    url = remote.kind === 'mirror-dir' ? pathToFileURL(remote.url).href : remote.url;
  } catch (error) {
    const failed = commits.map((commit) => ({ commit, status: 'failed' as const, error: errorMessage(error) }));
    return { repo: repo.repo, path: target, source: '', commits: failed, bytes: 0, ms: performance.now() - started };
  }
  const local = { cwd: target, timeoutMs };
  if ((await runGit(['rev-parse', '--is-bare-repository'], local).catch(() => null))?.stdout.trim() !== 'true') {
    await fs.rm(target, { recursive: true, force: true });
    await git(['init', '--quiet', '--bare', target], { timeoutMs, repo: repo.repo });
  }
  const isLocal = url.startsWith('file://') || !/^[a-z][a-z0-9+.-]*:\/\//i.test(url);
  const uploadPack = isLocal ? ['--upload-pack=git -c uploadpack.allowAnySHA1InWant=true upload-pack'] : [];
  const results: MirrorCommitResult[] = [];
  for (const commit of commits) {
    if (commit === HEAD_COMMIT) {
      results.push(await mirrorHead(url, uploadPack, local));
      continue;
    }
    const ref = `refs/commits/${commit}`;
    const present = await runGit(['rev-parse', '--verify', '--quiet', `${ref}^{commit}`], local);
    if (present.code === 0 && present.stdout.trim() === commit) {
      results.push({ commit, status: 'present', error: null });
      continue;
    }
    const fetched = await runGit(['fetch', '--quiet', '--depth=1', ...uploadPack, '--', url, `+${commit}:${ref}`], local).catch(
      (e: unknown) => ({
        code: -1,
        stdout: '',
        stderr: errorMessage(e),
      }),
    );
    results.push(
      fetched.code === 0
        ? { commit, status: 'fetched', error: null }
        : { commit, status: 'failed', error: `git fetch --depth=1 ${url} ${commit} failed: ${lastLines(fetched.stderr)}` },
    );
  }
  if (!opts.skipGc && results.some((r) => r.status === 'fetched')) {
    await git(['gc', '--quiet', '--aggressive', '--prune=now'], { ...local, repo: repo.repo });
  }
  return { repo: repo.repo, path: target, source: url, commits: results, bytes: await diskUsage(target), ms: performance.now() - started };
}

/** The source's head as the mirror's `main` (and HEAD), fetched one commit deep unless the mirror has a `main` already. */
async function mirrorHead(url: string, uploadPack: string[], local: { cwd: string; timeoutMs: number }): Promise<MirrorCommitResult> {
  const present = await runGit(['rev-parse', '--verify', '--quiet', 'refs/heads/main^{commit}'], local);
  if (present.code !== 0) {
    const fetched = await runGit(['fetch', '--quiet', '--depth=1', ...uploadPack, '--', url, '+HEAD:refs/heads/main'], local).catch(
      (e: unknown) => ({ code: -1, stdout: '', stderr: errorMessage(e) }),
    );
    if (fetched.code !== 0)
      return { commit: HEAD_COMMIT, status: 'failed', error: `git fetch --depth=1 ${url} HEAD failed: ${lastLines(fetched.stderr)}` };
  }
  await git(['symbolic-ref', 'HEAD', 'refs/heads/main'], local);
  return { commit: HEAD_COMMIT, status: present.code === 0 ? 'present' : 'fetched', error: null };
}
