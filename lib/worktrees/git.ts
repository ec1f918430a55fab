import { spawn } from 'node:child_process';
import { WorktreeError } from './errors';

/**
 * Runs git with an argument array (never a shell) in its own process group, so a timeout or an abort kills
 * git and every helper it started (remote-https, index-pack), not just the parent.
 *
 * The environment never lets git wait for a human: no terminal prompt, an askpass that answers nothing
 * (App. A.2), ssh in batch mode. LC_ALL=C keeps messages in English so failures can be classified, and
 * inherited GIT_DIR-style variables are dropped so a caller running inside a git hook cannot redirect us.
 */
export interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface GitOptions {
  cwd?: string;
  timeoutMs: number;
  signal?: AbortSignal;
}

const OUTPUT_CAP_BYTES = 64 * 1024 * 1024;
const DROPPED_ENV = ['GIT_DIR', 'GIT_WORK_TREE', 'GIT_INDEX_FILE', 'GIT_OBJECT_DIRECTORY', 'GIT_COMMON_DIR', 'GIT_PREFIX'];

export function gitEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of DROPPED_ENV) delete env[k];
  env.GIT_TERMINAL_PROMPT = '0';
  env.GIT_ASKPASS = 'echo';
  env.SSH_ASKPASS = 'echo';
  env.GIT_SSH_COMMAND = env.GIT_SSH_COMMAND ?? 'ssh -o BatchMode=yes';
  // A checkout must never reach the network for large files.
  env.GIT_LFS_SKIP_SMUDGE = '1';
  env.LC_ALL = 'C';
  env.LANGUAGE = 'C';
  return env;
}

/** Runs git; resolves with the exit code whatever it is. Rejects only on timeout, abort or spawn failure. */
export function runGit(args: string[], opts: GitOptions): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) {
      reject(new WorktreeError('aborted', `git ${args[0] ?? ''} aborted before it started`, { retryable: true }));
      return;
    }
    const child = spawn('git', args, {
      cwd: opts.cwd,
      env: gitEnv(),
      shell: false,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    child.stdout.on('data', (b: Buffer) => {
      if ((outBytes += b.length) <= OUTPUT_CAP_BYTES) out.push(b);
    });
    child.stderr.on('data', (b: Buffer) => {
      if ((errBytes += b.length) <= OUTPUT_CAP_BYTES) err.push(b);
    });
    let killedFor: 'timeout' | 'abort' | undefined;
    const killGroup = (why: 'timeout' | 'abort') => {
      killedFor = why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        child.kill('SIGKILL');
      }
    };
    const timer = setTimeout(() => killGroup('timeout'), opts.timeoutMs);
    const onAbort = () => killGroup('abort');
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
    };
    child.on('error', (e) => {
      done();
      reject(new WorktreeError('git-failed', `could not run git: ${e.message}`, { retryable: false, cause: e }));
    });
    child.on('close', (code, signal) => {
      done();
      const stderr = Buffer.concat(err).toString('utf8');
      if (killedFor === 'timeout') {
        reject(
          new WorktreeError('git-timeout', `git ${args.join(' ')} timed out after ${opts.timeoutMs} ms`, {
            retryable: true,
          }),
        );
      } else if (killedFor === 'abort') {
        reject(new WorktreeError('aborted', `git ${args.join(' ')} aborted`, { retryable: true }));
      } else {
        resolve({ code: code ?? (signal ? 128 : 1), stdout: Buffer.concat(out).toString('utf8'), stderr });
      }
    });
  });
}

/**
 * Runs git and throws a `git-failed` error naming the command and its stderr when it exits non-zero. An
 * unclassified failure counts as retryable; callers that know better (unreachable remote) say so themselves.
 */
export async function git(args: string[], opts: GitOptions & { repo?: string; commit?: string }): Promise<string> {
  const r = await runGit(args, opts);
  if (r.code !== 0) {
    throw new WorktreeError(
      'git-failed',
      `git ${args.join(' ')} failed (exit ${r.code})${opts.repo ? ` for ${opts.repo}` : ''}: ${lastLines(r.stderr)}`,
      { retryable: true, repo: opts.repo, commit: opts.commit },
    );
  }
  return r.stdout;
}

export function lastLines(text: string, n = 4): string {
  const lines = text.trim().split('\n').filter((l) => l.trim() !== '');
  return lines.slice(-n).join(' | ') || '(no output)';
}
