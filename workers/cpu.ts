/**
 * The CPU worker: every workflow and every CPU activity, on task queue `codegrep`.
 * Run it with `npm run worker` (or `codegrep worker`); it stops cleanly on SIGINT/SIGTERM, letting running
 * activities finish within shutdownGraceTime, after which they are retried elsewhere from their heartbeats.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import * as activities from '../activities';
import { setActivityClient } from '../activities/kit';
import { temporalConfig } from '../temporal.config';
import { connectClient, connectWorkerConnection, type TemporalConnectionSettings } from './connection';

const here = path.dirname(fileURLToPath(import.meta.url));
export const workflowsPath = path.resolve(here, '../workflows/index.ts');

export interface CpuWorkerOptions {
  address?: string;
  namespace?: string;
  taskQueue?: string;
  /** TLS / mTLS / API key settings over temporal.config.ts's (workers/connection.ts). */
  connection?: Partial<TemporalConnectionSettings>;
  /** Extra worker options (tests shorten timeouts). */
  overrides?: Partial<WorkerOptions>;
}

export async function createCpuWorker(options: CpuWorkerOptions = {}): Promise<{ worker: Worker; close(): Promise<void> }> {
  const address = options.address ?? temporalConfig.address;
  const namespace = options.namespace ?? temporalConfig.namespace;
  const settings = { address, namespace, ...options.connection };
  const clientConnection = await connectClient(settings);
  const nativeConnection = await connectWorkerConnection(settings).catch(async (error: unknown) => {
    await clientConnection.close();
    throw error;
  });
  setActivityClient(new Client({ connection: clientConnection, namespace }));
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace,
    taskQueue: options.taskQueue ?? temporalConfig.taskQueues.cpu,
    workflowsPath,
    activities,
    shutdownGraceTime: temporalConfig.worker.shutdownGraceTimeMs,
    maxConcurrentActivityTaskExecutions: temporalConfig.worker.maxConcurrentActivities,
    ...options.overrides,
  });
  return {
    worker,
    close: async () => {
      setActivityClient(null);
      await clientConnection.close();
      await nativeConnection.close();
    },
  };
}

async function main(): Promise<void> {
  const { worker, close } = await createCpuWorker();
  console.log(
    `codegrep worker: namespace ${temporalConfig.namespace}, task queue ${temporalConfig.taskQueues.cpu}, server ${temporalConfig.address}`,
  );
  try {
    await worker.run(); // the SDK shuts down gracefully on SIGINT/SIGTERM
  } finally {
    await close();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    process.exit(1);
  });
}
