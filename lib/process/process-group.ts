import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';

/**
 * The one way this codebase starts an outside program: an argument array (never a shell), in a process group
 * of its own (`detached`), so a stop reaches the program and everything it started (pytest workers, git
 * helpers, data loaders, vLLM workers), not just the parent. Used by runProcess (lib/downstream), runGit
 * (lib/worktrees) and the trainer launch (activities/training.ts).
 *
 * A stop (a timeout, an abort, or `stop()`) sends SIGTERM to the group and SIGKILL after `graceMs`; with no
 * grace (the default) SIGKILL at once. `exited` resolves once the program is reaped and its pipes are drained,
 * in every case: a program that cannot be started resolves with `spawnError` rather than rejecting.
 */

/** Where a stream of the child goes: a file to append to (survives our own death), a chunk callback, or nowhere. */
export type OutputTarget = { file: string } | ((chunk: Buffer) => void) | 'ignore';

export interface ProcessGroupOptions {
  cwd?: string;
  /** The full environment of the child (callers decide what it inherits). */
  env: NodeJS.ProcessEnv;
  /** Written to the child's stdin, then stdin is closed; without it stdin is /dev/null. */
  stdin?: string;
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
}

export interface ProcessGroupExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The first reason the group was stopped for (`timeout`, `abort`, or what `stop()` was given); null when it ended by itself. */
  stoppedFor: string | null;
  /** Set when the program could not be started; its `code` is the errno name (ENOENT, EACCES …). */
  spawnError?: NodeJS.ErrnoException;
}

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
      child.stdin.end(options.stdin);
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
      const settle = (code: number | null, signal: NodeJS.Signals | null) => {
        clearTimeout(timer);
        clearTimeout(this.killTimer);
        options.signal?.removeEventListener('abort', onAbort);
        resolve({ code, signal, stoppedFor: this.stopReason, ...(spawnError ? { spawnError } : {}) });
      };
      // A killed group leader may leave grandchildren holding the pipes; 'close' waits for them, and the group
      // stop reached them too.
      child.once('close', settle);
      this.spawned.catch(() => settle(null, null));
    });
    if (options.signal?.aborted) onAbort();
    else options.signal?.addEventListener('abort', onAbort, { once: true });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The first reason given to `stop()` (or `timeout` / `abort`), null while nobody stopped the group. */
  get stoppedFor(): string | null {
    return this.stopReason;
  }

  /** Signals the whole group; false when it is already gone. */
  signal(signal: NodeJS.Signals): boolean {
    return this.child.pid === undefined ? false : signalProcessGroup(this.child.pid, signal);
  }

  /** SIGTERM, then SIGKILL after `graceMs` (at once without grace). Only the first stop counts. */
  stop(reason: string): void {
    if (this.stopReason !== null) return;
    this.stopReason = reason;
    const grace = this.options.graceMs ?? 0;
    if (grace <= 0) {
      this.signal('SIGKILL');
      return;
    }
    this.signal('SIGTERM');
    this.killTimer = setTimeout(() => {
      this.options.onForceKill?.(reason);
      this.signal('SIGKILL');
    }, grace);
  }
}

/** Starts `program` in a process group of its own (see ProcessGroup). Throws only for arguments Node refuses outright. */
export function startProcessGroup(program: string, args: readonly string[], options: ProcessGroupOptions): ProcessGroup {
  return new ProcessGroup(program, args, options);
}
