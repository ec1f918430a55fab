import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startProcessGroup } from '../process';
import { WorktreeError } from './errors';

/**
 * Runs git with an argument array (never a shell) in its own process group (lib/process), so a timeout or an abort kills
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
  /** stdout went past OUTPUT_CAP_BYTES: `stdout` holds only its first part. */
  stdoutTruncated: boolean;
}

export interface GitOptions {
  cwd?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  /**
   * The command runs on a checkout whose files an agent (or an untrusted repository) wrote: run it with
   * hardenedGitEnv and HARDENED_GIT_CONFIG so that no config key, hook or attribute can start a program.
   * Needs `cwd` (the checkout or bare repository the command is about).
   */
  hardened?: boolean;
  /**
   * Variables set on top of the (hardened) environment, e.g. GIT_DIR / GIT_WORK_TREE of a private git dir
   * (privateGitDir). Only variables the caller names; nothing is inherited through them.
   */
  env?: Record<string, string>;
  /** Receives stdout as it comes instead of buffering it (no output cap then; `GitRun.stdout` is ''). */
  onStdout?: (chunk: Buffer) => void;
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

/**
 * Command-line config (`-c`) for git commands on agent-touched worktrees. Command-line scope outranks every
 * config file, so these hold even against a repository config the attacker wrote. Every key `git help
 * config` documents as running a program, and how it is neutralised:
 * - core.fsmonitor (runs a hook on every index read): false here;
 * - hooks (post-index-change fires on `git add`, post-checkout, ...): core.hooksPath=/dev/null;
 * - core.pager / pager.<cmd>: `--no-pager` (callers) and GIT_PAGER=cat; core.editor / sequence.editor:
 *   GIT_EDITOR / GIT_SEQUENCE_EDITOR, which git prefers to the config; core.sshCommand / ssh:
 *   GIT_SSH_COMMAND=false, which outranks core.sshCommand; core.askPass: GIT_ASKPASS; credential.helper:
 *   reset to empty here; transports (core.gitProxy, remote.*.uploadpack, ext::): protocol.allow=never;
 * - diff.external and diff.<driver>.command: `--no-ext-diff` on every diff; diff.<driver>.textconv:
 *   `--no-textconv` (see workspacePatch); merge drivers: no hardened command merges;
 * - filter.<driver>.clean/smudge/process: these keys cannot be wildcarded on the command line, so they are
 *   neutralised by where they may come from: system and global config are off (GIT_CONFIG_NOSYSTEM,
 *   GIT_CONFIG_GLOBAL=/dev/null), and the repository's own config lives in the bare clone, outside the
 *   checkout, where no agent write can reach (the editor refuses every resolved path with a `.git`
 *   component and every symlink). An agent-written .gitattributes naming a filter therefore names a
 *   driver that is not defined, which git ignores.
 * - uploadpack.packObjectsHook: honoured only from system/global config, both off; no hardened command
 *   runs upload-pack anyway (protocol.allow=never).
 * - gc.auto / maintenance.auto: off, so no background `git gc` outlives the call.
 */
export const HARDENED_GIT_CONFIG: readonly string[] = [
  'core.fsmonitor=false',
  'core.hooksPath=/dev/null',
  'core.untrackedCache=false',
  'core.attributesFile=/dev/null',
  'credential.helper=',
  'protocol.allow=never',
  'submodule.recurse=false',
  'gc.auto=0',
  'maintenance.auto=false',
  'commit.gpgSign=false',
];

/** `HARDENED_GIT_CONFIG` as git's leading `-c KEY=VALUE` arguments, plus `--no-pager`. */
export function hardenedGitArgs(args: readonly string[]): string[] {
  return ['--no-pager', ...HARDENED_GIT_CONFIG.flatMap((kv) => ['-c', kv]), ...args];
}

/**
 * The environment for git on an agent-touched worktree `cwd`: every inherited GIT_* variable dropped (a
 * GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF or GIT_DIR from the worker's own environment must not leak in),
 * system and global config ignored, repository discovery stopped at `cwd` itself (GIT_CEILING_DIRECTORIES =
 * its parent, so a checkout whose `.git` vanished can never make git find and diff an enclosing repository),
 * and every program-running variable pinned to a no-op. safe.directory is deliberately left alone: git's
 * ownership check stays on (global config, where a `safe.directory=*` could live, is ignored), and the
 * checkouts are created by the worker itself, so they pass it.
 */
export function hardenedGitEnv(cwd: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GIT_')) env[k] = v;
  Object.assign(env, {
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_SYSTEM: '/dev/null',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CEILING_DIRECTORIES: path.dirname(path.resolve(cwd)),
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: 'true',
    SSH_ASKPASS: 'true',
    GIT_SSH_COMMAND: 'false',
    GIT_PAGER: 'cat',
    PAGER: 'cat',
    GIT_EDITOR: 'true',
    GIT_SEQUENCE_EDITOR: 'true',
    GIT_LFS_SKIP_SMUDGE: '1',
    GIT_OPTIONAL_LOCKS: '0',
    LC_ALL: 'C',
    LANGUAGE: 'C',
  });
  return env;
}

/** Runs git; resolves with the exit code whatever it is. Rejects only on timeout, abort or spawn failure. */
export function runGit(args: string[], opts: GitOptions): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    if (opts.signal?.aborted) {
      reject(new WorktreeError('aborted', `git ${args[0] ?? ''} aborted before it started`, { retryable: true }));
      return;
    }
    if (opts.hardened && opts.cwd === undefined) {
      reject(new WorktreeError('git-failed', `hardened git ${args[0] ?? ''} needs a cwd`, { retryable: false }));
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    const group = startProcessGroup('git', opts.hardened ? hardenedGitArgs(args) : args, {
      cwd: opts.cwd,
      env: { ...(opts.hardened ? hardenedGitEnv(opts.cwd!) : gitEnv()), ...opts.env },
      stdout:
        opts.onStdout ??
        ((b) => {
          if ((outBytes += b.length) <= OUTPUT_CAP_BYTES) out.push(b);
        }),
      stderr: (b) => {
        if ((errBytes += b.length) <= OUTPUT_CAP_BYTES) err.push(b);
      },
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
    });
    void group.exited.then(({ code, signal, stoppedFor, spawnError }) => {
      const stderr = Buffer.concat(err).toString('utf8');
      if (spawnError) {
        reject(new WorktreeError('git-failed', `could not run git: ${spawnError.message}`, { retryable: false, cause: spawnError }));
      } else if (stoppedFor === 'timeout') {
        reject(
          new WorktreeError('git-timeout', `git ${args.join(' ')} timed out after ${opts.timeoutMs} ms`, {
            retryable: true,
          }),
        );
      } else if (stoppedFor === 'abort') {
        reject(new WorktreeError('aborted', `git ${args.join(' ')} aborted`, { retryable: true }));
      } else {
        resolve({
          code: code ?? (signal ? 128 : 1),
          stdout: Buffer.concat(out).toString('utf8'),
          stderr,
          stdoutTruncated: outBytes > OUTPUT_CAP_BYTES,
        });
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
  // A caller that wants the output must never get a silently cut one (a pre-image, a patch): past the cap it fails.
  if (r.stdoutTruncated) {
    throw new WorktreeError(
      'git-failed',
      `git ${args.join(' ')}: output over ${OUTPUT_CAP_BYTES / 1024 / 1024} MiB${opts.repo ? ` for ${opts.repo}` : ''}`,
      {
        retryable: false,
        repo: opts.repo,
        commit: opts.commit,
      },
    );
  }
  return r.stdout;
}

export function lastLines(text: string, n = 4): string {
  const lines = text
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '');
  return lines.slice(-n).join(' | ') || '(no output)';
}

/**
 * `$GIT_DIR/info/attributes` of a private git dir: the highest-precedence attribute file, so this line wins
 * over every `.gitattributes` an agent wrote (git help attributes, "precedence"). It resets each attribute
 * that makes git change bytes or run a program while adding or diffing: `text`/`eol`/`crlf` (line-ending
 * conversion), `working-tree-encoding` (re-encoding, which throws on a file that is not in that encoding),
 * `filter` (clean/smudge programs), `diff` (textconv and external drivers; `!diff` leaves git's own
 * binary detection), `merge`, `ident`. An agent's macro (`[attr]x filter=y`) expands into attributes this
 * line has already decided, so it changes nothing either.
 */
export const NEUTRAL_ATTRIBUTES = '* -text !eol !crlf !working-tree-encoding !filter !diff !merge -ident\n';

export interface PrivateGitDir {
  /** GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE and GIT_ATTR_NOSYSTEM for `runGit`'s `env` (with `hardened: true`). */
  env: Record<string, string>;
  /**
   * The private index started as a copy of the checkout's own (timestamps kept, so git's racy-entry check
   * still works): unchanged files are not re-read, and stay exactly as the checkout wrote them. False when
   * the checkout had no index; the caller then fills it from the base commit (`git read-tree`).
   */
  seededIndex: boolean;
  dispose(): Promise<void>;
}

/**
 * A throw-away git dir for reading an agent-written checkout: its own index (so the checkout's real index and
 * the shared bare clone are never written), its own objects (the repository's reached read-only through
 * alternates), NEUTRAL_ATTRIBUTES as its info/attributes, and none of the repository's config. Every git
 * call on the checkout's files then runs with hardenedGitEnv + HARDENED_GIT_CONFIG, and this dir's env.
 * The checkout's own git dir is only asked where its objects and index live.
 */
export async function privateGitDir(checkout: string, opts: { timeoutMs: number; signal?: AbortSignal }): Promise<PrivateGitDir> {
  const local = { cwd: checkout, timeoutMs: opts.timeoutMs, hardened: true, ...(opts.signal ? { signal: opts.signal } : {}) };
  const [commonDir = '', checkoutIndex = ''] = (
    await git(['rev-parse', '--path-format=absolute', '--git-common-dir', '--git-path', 'index'], local)
  )
    .trim()
    .split('\n');
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-gitdir-'));
  const index = path.join(dir, 'index');
  let seededIndex = false;
  try {
    await git(['init', '--quiet', '--bare', '--template=', dir], { ...local, cwd: dir });
    await fs.writeFile(path.join(dir, 'objects', 'info', 'alternates'), `${path.join(commonDir, 'objects')}\n`);
    await fs.mkdir(path.join(dir, 'info'), { recursive: true });
    await fs.writeFile(path.join(dir, 'info', 'attributes'), NEUTRAL_ATTRIBUTES);
    try {
      await fs.cp(checkoutIndex, index, { preserveTimestamps: true });
      seededIndex = true;
    } catch {
      // No index yet (or unreadable): the caller starts from the base commit's tree.
    }
  } catch (error) {
    await fs.rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    env: {
      GIT_DIR: dir,
      GIT_WORK_TREE: path.resolve(checkout),
      GIT_INDEX_FILE: index,
      // No /etc/gitattributes: a machine-wide attribute cannot name a filter or an encoding for agent files.
      GIT_ATTR_NOSYSTEM: '1',
    },
    seededIndex,
    dispose: () => fs.rm(dir, { recursive: true, force: true }),
  };
}
