import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { describeProcessState, processState } from './proc-stat';

/**
 * The one way this codebase starts an outside program: an argument array (never a shell), in a process group
 * of its own (`detached`), so a stop reaches the program and everything it started (pytest workers, git
 * helpers, data loaders, vLLM workers), not just the parent. Used by runProcess (lib/downstream), runGit
 * (lib/worktrees) and the trainer launch (activities/training.ts).
 *
 * A stop (a timeout, an abort, or `stop()`) sends SIGTERM to the group and SIGKILL after `graceMs`; with no
 * grace (the default) SIGKILL at once. `exited` resolves once the program is reaped and its pipes are drained,
 * in every case: a program that cannot be started resolves with `spawnError` rather than rejecting, and one
 * that SIGKILL did not end within `killWaitMs` resolves with `unkillable` (its /proc state: a process in
 * uninterruptible sleep, D, takes no signal until its kernel call returns, which for a hung GPU driver or
 * network file system call is never), so a caller waiting on `exited` is never stuck with it.
 */

/** Where a stream of the child goes: a file to append to (survives our own death), a chunk callback, or nowhere. */
export type OutputTarget = { file: string } | ((chunk: Buffer) => void) | 'ignore';

export interface ProcessGroupOptions {
  cwd?: string;
  /** The full environment of the child (callers decide what it inherits). */
  env: NodeJS.ProcessEnv;
  /**
   * Written to the child's stdin, then stdin is closed; without it stdin is /dev/null. `{ pipe: true }` keeps
   * stdin open for the caller to write to (`ProcessGroup.input`) as the program runs (a `git cat-file --batch`).
   */
  stdin?: string | { pipe: true };
  stdout?: OutputTarget;
  stderr?: OutputTarget;
  /** Stop the group (reason `timeout`) after this long. */
  timeoutMs?: number;
  /** Stop the group (reason `abort`) when this aborts, also when it already has. */
  signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL on a stop; 0 (the default) kills at once. */
  graceMs?: number;
  /** Called when a stopped group did not exit within `graceMs` and is about to get SIGKILL. */
  onForceKill?: (reason: string) => void;
  /** How long after SIGKILL the group may take to exit before `exited` gives up on it (`unkillable`); default 10 s. */
  killWaitMs?: number;
  /**
   * Sends a signal to the group (default signalProcessGroup). Tests stand in a kernel that cannot deliver SIGKILL
   * with it: no process an unprivileged test can start stays in uninterruptible sleep on demand.
   */
  signalGroup?: (pid: number, signal: NodeJS.Signals) => boolean;
}

/** A program SIGKILL did not end: the leader's pid and its /proc state. */
export interface UnkillableProcess {
  pid: number;
  /** The /proc state letter (D: uninterruptible sleep), null when /proc has no entry. */
  state: string | null;
  /** The state in words, with what it means for the user. */
  description: string;
}

export interface ProcessGroupExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The first reason the group was stopped for (`timeout`, `abort`, or what `stop()` was given); null when it ended by itself. */
  stoppedFor: string | null;
  /** Set when the program could not be started; its `code` is the errno name (ENOENT, EACCES …). */
  spawnError?: NodeJS.ErrnoException;
  /** Set when the program still ran `killWaitMs` after SIGKILL: `exited` stopped waiting for it (code and signal null). */
  unkillable?: UnkillableProcess;
}

const DEFAULT_KILL_WAIT_MS = 10_000;

/** Sends `signal` to the process group led by `pid` (or to `pid` alone when it leads none); false when it is gone. */
export function signalProcessGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }
}

export class ProcessGroup {
  /** Resolves once the program runs; rejects with the spawn error when it cannot start. */
  readonly spawned: Promise<void>;
  readonly exited: Promise<ProcessGroupExit>;
  private readonly child: ChildProcess;
  private stopReason: string | null = null;
  private killTimer: NodeJS.Timeout | undefined;
  private giveUpTimer: NodeJS.Timeout | undefined;
  /** The leader's own exit, which can come before 'close' (a process that left the group may hold the pipes). */
  private leaderExit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private settle: ((code: number | null, signal: NodeJS.Signals | null, unkillable?: UnkillableProcess) => void) | null = null;

  constructor(
    program: string,
    args: readonly string[],
    private readonly options: ProcessGroupOptions,
  ) {
    const files: number[] = [];
    const stdio = (target: OutputTarget | undefined): 'ignore' | 'pipe' | number => {
      if (target === undefined || target === 'ignore') return 'ignore';
      if (typeof target === 'function') return 'pipe';
      const fd = openSync(target.file, 'a');
      files.push(fd);
      return fd;
    };
    // The child holds its own copies of file descriptors; ours close once it started (or could not).
    const closeFiles = () => files.splice(0).forEach((fd) => closeSync(fd));
    try {
      this.child = spawn(program, [...args], {
        cwd: options.cwd,
        env: options.env,
        shell: false,
        detached: true,
        stdio: [options.stdin === undefined ? 'ignore' : 'pipe', stdio(options.stdout), stdio(options.stderr)],
      });
    } catch (error) {
      closeFiles();
      throw error;
    }
    const child = this.child;
    if (typeof options.stdout === 'function') child.stdout!.on('data', options.stdout);
    if (typeof options.stderr === 'function') child.stderr!.on('data', options.stderr);
    if (options.stdin !== undefined && child.stdin) {
      child.stdin.on('error', () => {
        // the program may exit without reading its stdin
      });
      if (typeof options.stdin === 'string') child.stdin.end(options.stdin);
    }
    let spawnError: ProcessGroupExit['spawnError'];
    this.spawned = new Promise<void>((resolve, reject) => {
      child.once('spawn', () => {
        closeFiles();
        resolve();
      });
      child.once('error', (error: NodeJS.ErrnoException) => {
        if (child.pid !== undefined) return; // a failed kill of a running child: its 'close' still comes
        closeFiles();
        spawnError = error;
        reject(error);
      });
    });
    this.spawned.catch(() => undefined);
    const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => this.stop('timeout'), options.timeoutMs);
    const onAbort = () => this.stop('abort');
    this.exited = new Promise<ProcessGroupExit>((resolve) => {
      let settled = false;
      const settle = (code: number | null, signal: NodeJS.Signals | null, unkillable?: UnkillableProcess) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        clearTimeout(this.killTimer);
        clearTimeout(this.giveUpTimer);
        options.signal?.removeEventListener('abort', onAbort);
        resolve({
          code,
          signal,
          stoppedFor: this.stopReason,
          ...(spawnError ? { spawnError } : {}),
          ...(unkillable ? { unkillable } : {}),
        });
      };
      this.settle = settle;
      child.once('exit', (code, signal) => (this.leaderExit = { code, signal }));
      // A killed group leader may leave grandchildren holding the pipes; 'close' waits for them, and the group
      // stop reached them too.
      child.once('close', (code, signal) => settle(code, signal));
      this.spawned.catch(() => settle(null, null));
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The child's stdin when started with `stdin: { pipe: true }` (the caller ends it); null otherwise. */
  get input(): NodeJS.WritableStream | null {
    return typeof this.options.stdin === 'object' ? this.child.stdin : null;
  }

  /** The first reason given to `stop()` (or `timeout` / `abort`), null while nobody stopped the group. */
  get stoppedFor(): string | null {
    return this.stopReason;
  }

  /** Signals the whole group; false when it is already gone. */
  signal(signal: NodeJS.Signals): boolean {
    if (this.child.pid === undefined) return false;
    return (this.options.signalGroup ?? signalProcessGroup)(this.child.pid, signal);
  }

  /**
   * SIGTERM, then SIGKILL after `graceMs` (at once without grace); `killWaitMs` after SIGKILL, `exited` resolves
   * whether or not the group is gone (see `unkillable`). Only the first stop counts.
   */
  stop(reason: string): void {
    if (this.stopReason !== null) return;
    this.stopReason = reason;
    const grace = this.options.graceMs ?? 0;
    if (grace <= 0) {
      this.kill();
      return;
    }
    this.signal('SIGTERM');
    this.killTimer = setTimeout(() => {
      // The callback is the caller's: a throw there must not keep the group from its SIGKILL.
      try {
        this.options.onForceKill?.(reason);
      } finally {
        this.kill();
      }
    }, grace);
  }

  private kill(): void {
    this.signal('SIGKILL');
    this.giveUpTimer = setTimeout(() => this.giveUp(), this.options.killWaitMs ?? DEFAULT_KILL_WAIT_MS);
  }

  /** `killWaitMs` after SIGKILL: the leader exited but something outside the group holds its pipes, or it is unkillable. */
  private giveUp(): void {
    if (this.leaderExit) {
      this.settle?.(this.leaderExit.code, this.leaderExit.signal);
      return;
    }
    const pid = this.child.pid!;
    const state = processState(pid);
    this.settle?.(null, null, { pid, state, description: describeProcessState(state) });
  }
}

/** Starts `program` in a process group of its own (see ProcessGroup). Throws only for arguments Node refuses outright. */
export function startProcessGroup(program: string, args: readonly string[], options: ProcessGroupOptions): ProcessGroup {
  return new ProcessGroup(program, args, options);
}
