import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { inject } from 'vitest';
import { createCpuWorker } from '../../workers/cpu';
import { repoRoot } from './repo-root';

/** The dev server started by test/support/global-setup.ts. */
export function temporalAddress(): string {
  return inject('temporalAddress');
}

export async function testClient(): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address: temporalAddress() });
  return { client: new Client({ connection, namespace: 'codegrep' }), close: () => connection.close() };
}

/** A task queue of its own per test, so workers of parallel test files never take each other's tasks. */
export function uniqueTaskQueue(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

let runtimeInstalled = false;

/** The real CPU worker, in this process, on its own task queue. */
export async function startWorker(taskQueue: string): Promise<{ stop(): Promise<void> }> {
  if (!runtimeInstalled) {
    Runtime.install({ logger: new DefaultLogger('WARN') });
    runtimeInstalled = true;
  }
  const { worker, close } = await createCpuWorker({ address: temporalAddress(), taskQueue });
  const running = worker.run();
  return {
    stop: async () => {
      worker.shutdown();
      await running;
      await close();
    },
  };
}

/**
 * The real CPU worker as a separate process (`tsx workers/cpu.ts`), so a test can SIGKILL it mid-activity.
 * Resolves once the worker logs that it is polling.
 */
export async function spawnWorkerProcess(taskQueue: string, env: Record<string, string> = {}): Promise<ChildProcess> {
  // `node --import tsx` (not the tsx CLI, which runs node as a grandchild): the pid we kill is the worker.
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'workers/cpu.ts')], {
    cwd: repoRoot,
    detached: true,
    env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: temporalAddress(), CODEGREP_TASK_QUEUE: taskQueue, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('codegrep worker:')) resolve();
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
