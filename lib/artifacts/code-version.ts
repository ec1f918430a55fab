import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { startProcessGroup } from '../process';

const projectRoot = fileURLToPath(new URL('../../', import.meta.url));

let cached: Promise<string> | undefined;

/**
 * Which code wrote an artifact: the git HEAD short sha of the project checkout, or the package.json version
 * where there is no git (an installed copy). Computed once per process.
 */
export function codeVersion(): Promise<string> {
  cached ??= resolveCodeVersion();
  return cached;
}

async function resolveCodeVersion(): Promise<string> {
  // Not a git checkout, or git missing (a spawn error, a non-zero exit): fall back to the package version.
  const chunks: Buffer[] = [];
  const git = startProcessGroup('git', ['rev-parse', '--short', 'HEAD'], {
    cwd: projectRoot,
    timeoutMs: 5_000,
    env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
    stdout: (chunk) => chunks.push(chunk),
  });
  const exit = await git.exited;
  const sha = Buffer.concat(chunks).toString('utf8').trim();
  if (exit.code === 0 && /^[0-9a-f]{4,40}$/.test(sha)) return sha;
  try {
    const pkg = JSON.parse(await readFile(`${projectRoot}package.json`, 'utf8')) as { version?: unknown };
    if (typeof pkg.version === 'string' && pkg.version.length > 0) return pkg.version;
  } catch {
    // no readable package.json either
  }
  return 'unknown';
}
