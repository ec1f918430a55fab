import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { repoRoot } from './repo-root';

// No vitest imports here: the chaos suite (bench/chaos.ts) spawns and kills workers the same way.

/**
 * The real CPU worker as a separate process (`node --import tsx workers/cpu.ts`) against the Temporal server
 * at `address`, so a test can SIGKILL it mid-activity. Resolves once the worker logs that it is polling.
 */
export async function spawnWorkerAt(
  address: string,
  taskQueue: string,
  env: Record<string, string> = {},
  script = 'workers/cpu.ts',
): Promise<ChildProcess> {
  // `node --import tsx` (not the tsx CLI, which runs node as a grandchild): the pid we kill is the worker.
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, script)], {
    cwd: repoRoot,
    detached: true,
    env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: address, CODEGREP_TASK_QUEUE: taskQueue, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (/codegrep (gpu )?worker:/.test(output)) resolve(); // workers/cpu.ts or workers/gpu.ts
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`worker process exited with ${code} before polling:\n${output.slice(-2000)}`)));
    setTimeout(() => reject(new Error(`worker process did not start within 120 s:\n${output.slice(-2000)}`)), 120_000).unref();
  });
  return child;
}

/** SIGKILLs a worker process and its whole process group, and waits until it is gone. */
export async function killWorkerProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  await exited;
}
