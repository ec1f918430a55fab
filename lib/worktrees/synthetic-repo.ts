import { promises as fs } from 'node:fs';
import path from 'node:path';
import { git } from './git';

/**
 * Builds real git repositories with a known history, for the tests and the benchmark of this folder:
 * `files` Python-like files spread over packages, then `commits - 1` further commits on `main` that each
 * rewrite a few files and `VERSION` (which holds the commit's index, so a checkout can be checked).
 */
const IDENTITY = ['-c', 'user.name=codegrep', '-c', 'user.email=codegrep@localhost', '-c', 'commit.gpgsign=false'];
const TIMEOUT = { timeoutMs: 60_000 };

export interface SyntheticRepo {
  dir: string;
  /** Commits on main, oldest first; `commits[i]` has VERSION = `i`. */
  commits: string[];
}

export async function createSyntheticRepo(
  dir: string,
  opts: { files?: number; commits?: number; linesPerFile?: number } = {},
): Promise<SyntheticRepo> {
  const files = opts.files ?? 40;
  const commits = opts.commits ?? 10;
  const lines = opts.linesPerFile ?? 20;
  await fs.mkdir(dir, { recursive: true });
  await git(['init', '--quiet', '--initial-branch=main', dir], TIMEOUT);
  await Promise.all(Array.from({ length: files }, (_, i) => writeFile(dir, fileName(i), moduleText(i, 0, lines))));
  const shas: string[] = [];
  for (let c = 0; c < commits; c++) {
    if (c > 0) {
      for (let k = 0; k < 3; k++) {
        const i = (c * 7 + k * 13) % files;
        await writeFile(dir, fileName(i), moduleText(i, c, lines));
      }
    }
    await writeFile(dir, 'VERSION', `${c}\n`);
    shas.push(await commitAll(dir, `commit ${c}`));
  }
  return { dir, commits: shas };
}

/** Writes `files` and commits them on the current branch; returns the new commit. */
export async function commitFiles(dir: string, files: Record<string, string>, message: string): Promise<string> {
  for (const [name, text] of Object.entries(files)) await writeFile(dir, name, text);
  return commitAll(dir, message);
}

/** Creates `branch` at the tip of main with the given commits (one per entry), then goes back to main. */
export async function createBranch(dir: string, branch: string, commits: Record<string, string>[]): Promise<string[]> {
  await git(['checkout', '--quiet', '-b', branch, 'main'], { ...TIMEOUT, cwd: dir });
  const shas: string[] = [];
  for (const [i, files] of commits.entries()) shas.push(await commitFiles(dir, files, `${branch} ${i}`));
  await git(['checkout', '--quiet', 'main'], { ...TIMEOUT, cwd: dir });
  return shas;
}

export async function bareMirror(source: string, target: string): Promise<string> {
  await fs.mkdir(path.dirname(target), { recursive: true });
  await git(['clone', '--quiet', '--bare', source, target], TIMEOUT);
  return target;
}

async function commitAll(dir: string, message: string): Promise<string> {
  await git(['add', '--all'], { ...TIMEOUT, cwd: dir });
  await git([...IDENTITY, 'commit', '--quiet', '--no-verify', '-m', message], { ...TIMEOUT, cwd: dir });
  return (await git(['rev-parse', 'HEAD'], { ...TIMEOUT, cwd: dir })).trim();
}

function fileName(i: number): string {
  return `src/pkg${i % 25}/module_${i}.py`;
}

function moduleText(i: number, version: number, lines: number): string {
  const body = Array.from({ length: lines }, (_, l) => `    total += ${i} * ${l} + ${version}  # line ${l}`);
  return `"""Module ${i}, revision ${version}."""\n\n\ndef compute_${i}(total=0):\n${body.join('\n')}\n    return total\n`;
}

async function writeFile(root: string, rel: string, text: string): Promise<void> {
  const p = path.join(root, rel);
  await fs.mkdir(path.dirname(p), { recursive: true });
  await fs.writeFile(p, text);
}
