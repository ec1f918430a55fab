import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import path from 'node:path';
import { repoRoot } from './repo-root';
import { temporalAddress } from './temporal';

/**
 * The real GPU worker as a separate process (`node --import tsx workers/gpu.ts`) on its own task queue, so a
 * test can SIGKILL it mid-segment (with killWorkerProcess). On a machine without a GPU the trainer runs on the
 * CPU. Resolves once the worker logs that it is polling. Its output is appended to `logFile` when given.
 */
export async function spawnGpuWorkerProcess(taskQueue: string, env: Record<string, string> = {}, logFile?: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'workers/gpu.ts')], {
    cwd: repoRoot,
    detached: true,
    env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: temporalAddress(), CODEGREP_GPU_TASK_QUEUE: taskQueue, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString()).slice(-20_000);
      if (logFile) appendFileSync(logFile, chunk);
    };
    child.stdout!.on('data', (chunk: Buffer) => {
      keep(chunk);
      if (output.includes('codegrep gpu worker:')) resolve();
    });
    child.stderr!.on('data', keep);
    child.once('exit', (code) => reject(new Error(`gpu worker process exited with ${code} before polling:\n${output.slice(-2000)}`)));
    setTimeout(() => reject(new Error(`gpu worker process did not start within 120 s:\n${output.slice(-2000)}`)), 120_000).unref();
  });
  return child;
}
