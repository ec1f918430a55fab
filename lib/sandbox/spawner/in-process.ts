import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable } from 'node:stream';
import { signalProcessGroup } from '../../process';
import type { LaunchedPipeline, PipelineEvents, PipelineLauncher, PipelineSpec } from './launcher';

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  // detached: true made the child a process-group leader; the group signal reaches all of it.
  signalProcessGroup(child.pid, 'SIGKILL');
}

/**
 * Starts the pipeline with Node's own `spawn`, from the worker's event loop: the reference path, and the one
 * used where the spawner helper cannot run (no python3). Each `spawn` forks the worker and waits for the
 * child's exec synchronously, which is what stalls the loop under load (lib/sandbox/spawner/README.md).
 */
export const inProcessLauncher: PipelineLauncher = {
  launch(spec: PipelineSpec, events: PipelineEvents): LaunchedPipeline {
    const children: ChildProcess[] = [];
    const kill = () => children.forEach(killGroup);
    let previousStdout: Readable | null = null;
    for (let i = 0; i < spec.argvs.length; i++) {
      const [executable, ...args] = spec.argvs[i]!;
      const isLast = i === spec.argvs.length - 1;
      let child: ChildProcess;
      try {
        child = spawn(executable!, args, {
          cwd: spec.cwd,
          env: spec.env,
          detached: true,
          shell: false,
          stdio: [previousStdout ?? 'ignore', 'pipe', 'pipe'],
        });
      } catch (error) {
        events.onSpawnError(i, error instanceof Error ? error.message : String(error));
        previousStdout?.destroy();
        kill();
        break;
      }
      // The child holds its own copy of the pipe; closing ours (in the same tick, before any read callback)
      // leaves it as the only reader, so upstream stages see SIGPIPE when it exits, as in a shell.
      previousStdout?.destroy();
      previousStdout = isLast ? null : child.stdout;
      children.push(child);
    }

    const finished = children.map(
      (child, i) =>
        new Promise<void>((resolve) => {
          let stderrBytes = 0;
          child.stderr?.on('data', (chunk: Buffer) => {
            if (stderrBytes >= spec.stderrLimitBytes) return;
            const piece = chunk.subarray(0, spec.stderrLimitBytes - stderrBytes);
            stderrBytes += piece.length;
            events.onStderr(i, piece);
          });
          child.on('error', (error) => {
            events.onSpawnError(i, error.message);
            if (child.pid === undefined) resolve();
          });
          child.on('close', (code, signal) => {
            events.onExit(i, code, signal);
            resolve();
          });
        }),
    );
    if (children.length === spec.argvs.length) children[children.length - 1]!.stdout?.on('data', (chunk: Buffer) => events.onStdout(chunk));
    return { kill, closed: Promise.all(finished).then(() => undefined) };
  },
};
