import { promises as fs } from 'node:fs';
import path from 'node:path';
import { REPO_SOURCE_CONFIG_KEY, RepoSourceSchema, type RepoSource } from '../../schemas/worktrees';
import { WorktreeError } from './errors';
import type { RepoName } from './repo-name';

/** Where to clone one repository from, and how to name that place in errors. */
export interface ResolvedRemote {
  url: string;
  kind: RepoSource['kind'];
}

export function parseRepoSource(source: unknown): RepoSource {
  const r = RepoSourceSchema.safeParse(source);
  if (!r.success) {
    throw new WorktreeError(
      'bad-source',
      `${REPO_SOURCE_CONFIG_KEY} is invalid: ${r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ')}`,
      { retryable: false },
    );
  }
  return r.data;
}

/** The mirror paths tried for a repository, in order: `<dir>/<owner>__<name>.git`, then `<dir>/<owner>/<name>.git`. */
export function mirrorCandidates(dir: string, repo: RepoName): string[] {
  const root = path.resolve(dir);
  return [path.join(root, `${repo.slug}.git`), path.join(root, repo.owner, `${repo.name}.git`)];
}

export async function resolveRemote(repo: RepoName, source: RepoSource): Promise<ResolvedRemote> {
  if (source.kind === 'url') {
    const url = source.template.replaceAll('{repo}', repo.repo).replaceAll('{owner}', repo.owner).replaceAll('{name}', repo.name);
    return { url, kind: 'url' };
  }
  const candidates = mirrorCandidates(source.dir, repo);
  for (const candidate of candidates) {
    if (await isDirectory(candidate)) return { url: candidate, kind: 'mirror-dir' };
  }
  throw new WorktreeError(
    'repo-unreachable',
    `no local mirror of ${repo.repo}: looked for ${candidates.join(' and ')}; ` +
      `create one with \`git clone --bare https://github.com/${repo.repo}.git ${candidates[0]}\` ` +
      `or point ${REPO_SOURCE_CONFIG_KEY} ({ kind: 'mirror-dir', dir }) at a directory that has it`,
    { retryable: false, repo: repo.repo, reason: 'mirror-missing' },
  );
}

async function isDirectory(p: string): Promise<boolean> {
  try {
    return (await fs.stat(p)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Failures that the same configuration will hit again: no such repository, no credentials for a private
 * one, no route to the host. Matched on git's (LC_ALL=C) stderr.
 */
const UNREACHABLE = [
  /does not appear to be a git repository/i,
  /repository .* not found/i,
  /could not read (username|password)/i,
  /authentication failed/i,
  /terminal prompts disabled/i,
  /could not resolve host/i,
  /could not resolve hostname/i,
  /failed to connect/i,
  /connection refused/i,
  /network is unreachable/i,
  /no route to host/i,
  /unable to access/i,
  /permission denied \(publickey/i,
  /host key verification failed/i,
  /could not read from remote repository/i,
  /unable to find remote helper/i,
  /not a git repository/i,
  /ssl certificate problem/i,
];

export function looksUnreachable(stderr: string): boolean {
  return UNREACHABLE.some((re) => re.test(stderr));
}

export function unreachableHint(repo: RepoName): string {
  return `if this machine is offline, or ${repo.repo} is private or renamed, set ${REPO_SOURCE_CONFIG_KEY} to { kind: 'mirror-dir', dir } where dir holds a bare mirror ${repo.slug}.git`;
}
