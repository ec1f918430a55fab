import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { inject } from 'vitest';
import { createCpuWorker } from '../../workers/cpu';
import { killWorkerProcess, spawnWorkerAt } from './worker-process';

export { killWorkerProcess };

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
export function spawnWorkerProcess(taskQueue: string, env: Record<string, string> = {}): Promise<ChildProcess> {
  return spawnWorkerAt(temporalAddress(), taskQueue, env);
}
