import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);
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
  try {
    const { stdout } = await execFileAsync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: projectRoot,
      timeout: 5_000,
      env: { ...process.env, GIT_TERMINAL_PROMPT: '0' },
    });
    const sha = stdout.trim();
    if (/^[0-9a-f]{4,40}$/.test(sha)) return sha;
  } catch {
    // not a git checkout, or git missing: fall back to the package version
  }
  try {
    const pkg = JSON.parse(await readFile(`${projectRoot}package.json`, 'utf8')) as { version?: unknown };
    if (typeof pkg.version === 'string' && pkg.version.length > 0) return pkg.version;
  } catch {
    // no readable package.json either
  }
  return 'unknown';
}
