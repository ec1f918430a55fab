import { existsSync, lstatSync, mkdtempSync, readlinkSync, realpathSync, writeFileSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { constants as osConstants } from 'node:os';
import { findExecutable } from './executables';
import { startProcessGroup } from '../process';

/**
 * Isolation by construction: every tool process runs in a bubblewrap (bwrap) sandbox whose mount namespace
 * holds the system's programs and libraries (read-only) and the one worktree, and no other data. Outward
 * symlinks then resolve to nothing, `.git` is empty, and nothing outside the worktree can be read, listed or
 * probed, whatever flags or output shapes a program has. Each sandbox also has its own PID, IPC, UTS,
 * cgroup and network namespaces (no network at all), drops every capability, starts a new session (no
 * terminal injection) and dies with its parent. The flag allowlist and the path guard stay as a second layer.
 *
 * The process count: RLIMIT_NPROC does not bind root inside the user namespace, so it is bounded by the
 * rest: the allowlisted programs never fork, each stage holds a permit of the global Semaphore(64), and a
 * sandbox's PID namespace dies with its init, which dies with bwrap (--die-with-parent), which the timeout
 * SIGKILLs with its process group.
 *
 * `filter-only` is the old behaviour (allowlists and path checks alone) for machines where user namespaces
 * are not allowed; it gives up the guarantees above, and the README's Security section says which.
 */
export type { SandboxIsolation } from '../../schemas/sandbox';

export interface NamespaceView {
  /** The worktree's canonical (realpath) root. It is mounted at the same path, so operands and output stay as they were. */
  root: string;
  /** Writable for the editor; read-only for the retrieval tools. */
  writable: boolean;
}

/** The host directories a sandboxed program may see: programs and shared libraries, never data. */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** Single files some programs need to start (the dynamic loader's cache; GNU tools' locale aliases). */
const SYSTEM_FILES = ['/etc/ld.so.cache', '/etc/ld.so.conf'];

let emptyFile: string | undefined;

/** A read-only empty file, bound over a linked worktree's `.git` file (which names the outside bare repository). */
function emptyFilePath(): string {
  if (emptyFile && existsSync(emptyFile)) return emptyFile;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-sandbox-'));
  const file = path.join(dir, 'empty');
  writeFileSync(file, '');
  chmodSync(file, 0o444);
  emptyFile = file;
  return file;
}

function isUnder(dir: string, candidate: string): boolean {
  return candidate === dir || candidate.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/**
 * bwrap's arguments for the system part of the view: each system dir bound read-only, or re-made as the
 * symlink it is. The host's layout does not change while a worker runs, so it is read once.
 */
let systemMountArgs: string[] | undefined;

function systemMounts(): string[] {
  if (systemMountArgs) return systemMountArgs;
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let stat;
    try {
      stat = lstatSync(dir);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
    else if (stat.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  for (const file of SYSTEM_FILES) if (existsSync(file)) args.push('--ro-bind', file, file);
  systemMountArgs = args;
  return args;
}

const programMountCache = new Map<string, string[]>();

/** programMounts, remembered per list of executables (their install places do not move while a worker runs). */
function cachedProgramMounts(executables: string[]): string[] {
  const key = executables.join('\0');
  let args = programMountCache.get(key);
  if (!args) {
    args = programMounts(executables);
    programMountCache.set(key, args);
  }
  return args;
}

/** Programs installed outside the system dirs (e.g. a ripgrep in ~/.cargo/bin) are bound one file each, read-only. */
function programMounts(executables: string[]): string[] {
  const args: string[] = [];
  const seen = new Set<string>();
  for (const executable of executables) {
    let real: string;
    try {
      real = realpathSync(executable);
    } catch {
      continue;
    }
    const visible = (p: string) => SYSTEM_DIRS.some((dir) => isUnder(dir, p));
    for (const p of [executable, real]) {
      if (visible(p) || seen.has(p)) continue;
      seen.add(p);
      args.push('--ro-bind', real, p);
    }
  }
  return args;
}

/** The worktree, and its `.git` (a directory in a clone, a file naming the bare repository in a linked worktree) made empty. */
function worktreeMounts(view: NamespaceView): string[] {
  const args = [view.writable ? '--bind' : '--ro-bind', view.root, view.root];
  const dotGit = path.join(view.root, '.git');
  let stat;
  try {
    stat = lstatSync(dotGit);
  } catch {
    return args;
  }
  if (stat.isDirectory()) args.push('--tmpfs', dotGit, '--remount-ro', dotGit);
  else args.push('--ro-bind', emptyFilePath(), dotGit);
  return args;
}

/**
 * The argument list that runs `executable args…` inside the sandbox with `cwd` as its working directory
 * (which must be inside `view.root`). `executable` and every program it execs must live in the system
 * dirs or be listed in `extraExecutables` (prlimit execs the tool, so both are listed by the caller).
 */
export function namespaceArgs(view: NamespaceView, cwd: string, extraExecutables: string[] = []): string[] {
  if (!isUnder(view.root, cwd)) throw new Error(`sandbox cwd ${cwd} is outside the worktree ${view.root}`);
  return [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--hostname',
    'sandbox',
    ...systemMounts(),
    ...cachedProgramMounts(extraExecutables),
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    ...worktreeMounts(view),
    '--chdir',
    cwd,
    '--',
  ];
}

/** The bwrap program, or null when it is not installed. */
export function bwrapExecutable(): string | null {
  return findExecutable('bwrap');
}

/**
 * bwrap reports a child killed by signal N as exit code 128 + N (it is the child's parent inside the PID
 * namespace). This turns such a code back into the signal, so limits (SIGXCPU) and kills read as they do
 * without the sandbox.
 */
export function decodeNamespaceExit(
  exitCode: number | null,
  signal: NodeJS.Signals | null,
): { exitCode: number | null; signal: NodeJS.Signals | null } {
  if (signal !== null || exitCode === null || exitCode <= 128 || exitCode >= 128 + 65) return { exitCode, signal };
  const number = exitCode - 128;
  const name = (Object.entries(osConstants.signals) as Array<[NodeJS.Signals, number]>).find(([, n]) => n === number)?.[0];
  return name ? { exitCode: null, signal: name } : { exitCode, signal };
}

/**
 * bwrap's own failure (a mount it could not make, namespaces it may not create): it exits 1 before the
 * program starts, with its reason on stderr prefixed `bwrap: `. Without this check such a failure would
 * read as the program's exit code 1 ("no matches" for grep). The allowlisted programs prefix their
 * messages with their own name, or (ripgrep) with a path operand, which the guard only lets through for
 * files that exist and so produce no error.
 */
export function namespaceSetupFailure(exitCode: number | null, stderr: string): string | undefined {
  if (exitCode !== 1 || !stderr.startsWith('bwrap: ')) return undefined;
  return `the sandbox could not start: ${stderr.split('\n')[0]!.slice(0, 300)}`;
}

/** What a tool call answers when isolation is asked for and this machine cannot provide it. */
export function sandboxUnavailableMessage(reason: string): string {
  return (
    `the tool sandbox is unavailable on this machine (${reason}); agent tools run only inside it. ` +
    'To run them with the flag allowlist and path guard alone, set sandbox.isolation: "filter-only" in the run config (README, Security)'
  );
}

/** The worker's start-up line about its agent tools: isolated, or NOT isolated and why. */
export function describeToolIsolation(probe: NamespaceProbe): string {
  return probe.ok
    ? `agent tools: isolated (each tool process in a bubblewrap namespace holding only its worktree; ${probe.bwrap})`
    : `agent tools: NOT isolated: ${probe.reason}. Tool calls fail unless the run config sets sandbox.isolation: "filter-only" (README, Security)`;
}

export type NamespaceProbe = { ok: true; bwrap: string } | { ok: false; reason: string };

let probed: Promise<NamespaceProbe> | undefined;

/**
 * Whether this machine can run the sandbox: bwrap is installed and may create the namespaces (user
 * namespaces may be disabled for unprivileged users, or forbidden inside a container). Runs `true` in a
 * throw-away view of an empty directory once per process and caches the answer.
 */
export function probeNamespace(): Promise<NamespaceProbe> {
  probed ??= (async (): Promise<NamespaceProbe> => {
    const bwrap = bwrapExecutable();
    if (!bwrap) return { ok: false, reason: 'bubblewrap (bwrap) is not installed (Debian/Ubuntu: apt-get install bubblewrap)' };
    const trueProgram = findExecutable('true') ?? '/usr/bin/true';
    const root = realpathSync(mkdtempSync(path.join(os.tmpdir(), 'codegrep-probe-')));
    const args = [...namespaceArgs({ root, writable: false }, root, [trueProgram]), trueProgram];
    const stderr: Buffer[] = [];
    const probe = startProcessGroup(bwrap, args, {
      timeoutMs: 10_000,
      env: { PATH: '/usr/bin:/bin' },
      stderr: (chunk) => stderr.push(chunk),
    });
    const exit = await probe.exited;
    if (exit.code === 0) return { ok: true, bwrap };
    const why =
      Buffer.concat(stderr).toString('utf8').trim() ||
      (exit.spawnError?.message ?? (exit.stoppedFor ? `stopped (${exit.stoppedFor})` : `exit ${exit.code ?? exit.signal}`));
    return { ok: false, reason: `bwrap cannot create the sandbox here: ${why.slice(0, 300)}` };
  })();
  return probed;
}
