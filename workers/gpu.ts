/**
 * The GPU worker: the training activity only, on task queue `codegrep-gpu` (temporal.config.ts
 * `taskQueues.gpu`), one segment at a time. Run it on the GPU node with `npm run worker:gpu`; the workflows
 * and every other activity stay on the CPU worker.
 *
 * On SIGINT/SIGTERM it stops polling and lets the running segment go on for shutdownGraceTime; then the
 * segment is cancelled, stops its trainer with SIGTERM (the trainer checkpoints and exits) and fails the
 * attempt, which a GPU worker retries from that checkpoint. A worker killed outright is noticed by the
 * heartbeat timeout; the retry reaps the trainer it left behind first.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import { setActivityClient } from '../activities/kit';
import { trainSegment } from '../activities/training';
import { setNodeDataDir } from '../lib/store-sync'; // store (issue #13)
import { temporalConfig } from '../temporal.config';
import { connectClient, connectWorkerConnection, type TemporalConnectionSettings } from './connection';

export interface GpuWorkerOptions {
  address?: string;
  namespace?: string;
  taskQueue?: string;
  /** TLS / mTLS / API key settings over temporal.config.ts's (workers/connection.ts). */
  connection?: Partial<TemporalConnectionSettings>;
  overrides?: Partial<WorkerOptions>;
  /**
   * This node's own data dir (issue #13): with a run `store`, segments work in `<dataDir>/<runId>` and keep
   * bare clones and worktrees in `<dataDir>/repos`, `<dataDir>/worktrees`. Default: CODEGREP_DATA_DIR, else
   * the run directory the workflow names (a shared mount, as without a store).
   */
  dataDir?: string;
}

export async function createGpuWorker(options: GpuWorkerOptions = {}): Promise<{ worker: Worker; close(): Promise<void> }> {
  const address = options.address ?? temporalConfig.address;
  const namespace = options.namespace ?? temporalConfig.namespace;
  const settings = { address, namespace, ...options.connection };
  const clientConnection = await connectClient(settings);
  const nativeConnection = await connectWorkerConnection(settings).catch(async (error: unknown) => {
    await clientConnection.close();
    throw error;
  });
  setActivityClient(new Client({ connection: clientConnection, namespace }));
  if (options.dataDir) setNodeDataDir(options.dataDir); // store (issue #13)
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace,
    taskQueue: options.taskQueue ?? temporalConfig.taskQueues.gpu,
    activities: { trainSegment },
    // One trainer owns the accelerator: never two segments at once on one node.
    maxConcurrentActivityTaskExecutions: 1,
    shutdownGraceTime: temporalConfig.worker.shutdownGraceTimeMs,
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
  const { worker, close } = await createGpuWorker();
  console.log(
    `codegrep gpu worker: namespace ${temporalConfig.namespace}, task queue ${temporalConfig.taskQueues.gpu}, server ${temporalConfig.address}`,
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
