import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { signalProcessGroup } from '../../process';
import type { LaunchedPipeline, PipelineEvents, PipelineLauncher, PipelineSpec } from './launcher';
import { encodeKill, encodeStart, FrameDecoder, type HelperMessage } from './protocol';

export const HELPER_SCRIPT = fileURLToPath(new URL('./helper.py', import.meta.url));

/** How long, after the helper died, its orphaned groups are watched for their exit before permits come back. */
const ORPHAN_EXIT_WAIT_MS = 5_000;
const HELPER_STDERR_KEPT = 2048;

interface InFlight {
  events: PipelineEvents;
  stages: number;
  pids: Map<number, number>;
  finished: Set<number>;
  killSent: boolean;
  resolve: () => void;
}

type RefCounted = { ref(): void; unref(): void };

/** True while a process group led by `pid` (or the process itself) still exists. */
function groupExists(pid: number): boolean {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 0);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EPERM') return true;
    }
  }
  return false;
}

async function waitForGroupsGone(pids: number[]): Promise<void> {
  const until = Date.now() + ORPHAN_EXIT_WAIT_MS;
  while (pids.some(groupExists) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
}

/**
 * One long-lived spawner helper (helper.py) per worker process, started on first use and restarted on the
 * next use after it died. Requests are multiplexed by id over its stdin/stdout. The helper lives in the
 * worker's process group and exits (killing its groups) when its stdin closes, so it dies with the worker.
 */
export class SpawnerHelperClient implements PipelineLauncher {
  private child: ChildProcess | null = null;
  private decoder = new FrameDecoder();
  private readonly inFlight = new Map<number, InFlight>();
  private nextId = 1;
  private stderrTail = '';
  /** How many helpers this client has started (1 + restarts); tests read it. */
  starts = 0;

  constructor(
    private readonly python: string,
    /** The helper's own bound on live processes (helper.py's default when absent). */
    private readonly maxProcesses?: number,
  ) {}

  /** The running helper's pid, or null before the first call and after it died. */
  get helperPid(): number | null {
    return this.child?.pid ?? null;
  }

  launch(spec: PipelineSpec, events: PipelineEvents): LaunchedPipeline {
    const child = this.ensureHelper();
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffff_fff0 ? 1 : this.nextId + 1;
    let resolve!: () => void;
    const closed = new Promise<void>((r) => (resolve = r));
    const request: InFlight = { events, stages: spec.argvs.length, pids: new Map(), finished: new Set(), killSent: false, resolve };
    this.inFlight.set(id, request);
    if (this.inFlight.size === 1) {
      child.ref();
      (child.stdout as unknown as RefCounted).ref();
    }
    child.stdin!.write(encodeStart(id, spec));
    return {
      kill: () => {
        const current = this.inFlight.get(id);
        if (!current || current.killSent || this.child !== child) return;
        current.killSent = true;
        child.stdin!.write(encodeKill(id));
      },
      closed,
    };
  }

  /** Closes the helper's stdin: it kills whatever it still runs and exits (as when the worker dies). */
  stop(): void {
    this.child?.stdin?.end();
  }

  private ensureHelper(): ChildProcess {
    if (this.child) return this.child;
    // Not detached: the helper stays in the worker's process group, so a kill of the worker's group reaches
    // it too; -I -S: no user site, no PYTHON* variables, no site import (faster start).
    const bound = this.maxProcesses === undefined ? [] : ['--max-processes', String(this.maxProcesses)];
    const child = spawn(this.python, ['-I', '-S', HELPER_SCRIPT, ...bound], { cwd: '/', stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.starts += 1;
    this.decoder = new FrameDecoder();
    this.stderrTail = '';
    // An idle helper must not keep the worker alive; stdout is ref'ed while a request is in flight.
    child.unref();
    for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as unknown as RefCounted).unref();
    child.stdin!.on('error', () => undefined); // EPIPE when it died; 'close' below handles that
    child.stderr!.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-HELPER_STDERR_KEPT);
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      try {
        this.decoder.push(chunk, (message) => this.deliver(message));
      } catch (error) {
        this.stderrTail += `\n${error instanceof Error ? error.message : String(error)}`;
        child.kill('SIGKILL');
      }
    });
    let gone = false;
    const onGone = (reason: string) => {
      if (gone) return;
      gone = true;
      if (this.child === child) this.child = null;
      this.failInFlight(reason);
    };
    child.on('error', (error) => onGone(`the spawner helper could not run: ${error.message}`));
    child.on('close', (code, signal) => {
      const detail = this.stderrTail.trim().split('\n').slice(-3).join(' | ');
      onGone(`the spawner helper exited (${signal ?? `code ${code}`})${detail ? `: ${detail}` : ''}`);
    });
    return child;
  }

  private deliver(message: HelperMessage): void {
    const request = this.inFlight.get(message.id);
    if (!request) return;
    switch (message.kind) {
      case 'started':
        request.pids.set(message.stage, message.pid);
        return;
      case 'spawnError':
        for (let stage = message.stage; stage < request.stages; stage++) request.finished.add(stage);
        request.events.onSpawnError(message.stage, message.message);
        return;
      case 'stdout':
        request.events.onStdout(message.chunk);
        return;
      case 'stderr':
        request.events.onStderr(message.stage, message.chunk);
        return;
      case 'exit':
        request.finished.add(message.stage);
        request.events.onExit(message.stage, message.exitCode, message.signal);
        return;
      case 'done':
        this.forget(message.id, request);
        return;
    }
  }

  private forget(id: number, request: InFlight): void {
    this.inFlight.delete(id);
    if (this.inFlight.size === 0 && this.child) {
      this.child.unref();
      (this.child.stdout as unknown as RefCounted).unref();
    }
    request.resolve();
  }

  /**
   * The helper is gone with requests in flight: their process groups (orphans now) are killed from here,
   * each unfinished stage is reported as failed, and `closed` resolves once those groups no longer exist.
   */
  private failInFlight(reason: string): void {
    const requests = [...this.inFlight.entries()];
    this.inFlight.clear();
    for (const [, request] of requests) {
      const orphans: number[] = [];
      for (let stage = 0; stage < request.stages; stage++) {
        if (request.finished.has(stage)) continue;
        const pid = request.pids.get(stage);
        if (pid !== undefined) {
          signalProcessGroup(pid, 'SIGKILL');
          orphans.push(pid);
        }
        request.events.onSpawnError(stage, reason);
      }
      void waitForGroupsGone(orphans).then(request.resolve);
    }
  }
}
