/**
 * What the CPU and the GPU worker share: connect (client + native connection, closing the first when the
 * second fails), read the activities' deps once (the Temporal client, this node's data dir, the environment, the
 * worker's logger: activities/kit/deps.ts) and build the activities with them, create the Worker, and on close
 * close both connections. Each worker file says only which task queue, which workflows and activities, and its limits;
 * and keeps its own `main` for `tsx workers/<name>.ts`.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import { Runtime, Worker, type WorkerOptions } from '@temporalio/worker';
import type { ActivityDeps } from '../activities/kit';
import { storeSettingsFromEnv } from '../lib/artifacts/store';
import { nodeDataDir } from '../lib/store-sync';
import { describeToolIsolation, probeNamespace } from '../lib/sandbox/namespace';
import { temporalConfig } from '../temporal.config';
import { connectClient, connectWorkerConnection, type TemporalConnectionSettings } from './connection';
import { guardWorkerProcess } from './process-guard';
import { trackRunningActivities } from './running-activities';

/** What a caller of createCpuWorker / createGpuWorker may set. */
export interface WorkerConnectOptions {
  address?: string;
  namespace?: string;
  taskQueue?: string;
  /** TLS / mTLS / API key settings over temporal.config.ts's (workers/connection.ts). */
  connection?: Partial<TemporalConnectionSettings>;
  /** Extra worker options (tests shorten timeouts). */
  overrides?: Partial<WorkerOptions>;
}

/** The worker kind's own part of WorkerOptions, with its activities built from the deps the worker read at start. */
export type WorkerDefaults = Omit<WorkerOptions, 'connection' | 'namespace' | 'activities'> & {
  activities: (deps: ActivityDeps) => object;
};

/**
 * The activities' deps, read once at worker start: everything an activity would otherwise take from module state
 * or `process.env` (the environment is copied, so a later change of `process.env` reaches no activity).
 */
export function readActivityDeps(client: Client | null, env: NodeJS.ProcessEnv = process.env): ActivityDeps {
  return {
    client,
    // CODEGREP_DATA_DIR (lib/store-sync/node-data-dir.ts), the node's own data dir for runs with a store.
    nodeDataDir: nodeDataDir(env),
    env: Object.freeze({ ...env }),
    // The S3 endpoint and credentials, and this node's cache of stored objects (lib/artifacts/store/settings.ts).
    store: storeSettingsFromEnv(env),
    // Lines an activity logs after it ended go through the worker's own logger (activities/kit/activity-log.ts).
    logger: Runtime.instance().logger,
  };
}

export interface RunningWorker {
  worker: Worker;
  close(): Promise<void>;
}

/**
 * `defaults` is the worker kind's own part of WorkerOptions (task queue, workflows, activities, limits);
 * `options.taskQueue` and `options.overrides` win over it.
 */
export async function createWorker(options: WorkerConnectOptions, defaults: WorkerDefaults): Promise<RunningWorker> {
  const address = options.address ?? temporalConfig.address;
  const namespace = options.namespace ?? temporalConfig.namespace;
  const settings = { address, namespace, ...options.connection };
  const clientConnection = await connectClient(settings);
  const nativeConnection = await connectWorkerConnection(settings).catch(async (error: unknown) => {
    await clientConnection.close();
    throw error;
  });
  const deps = readActivityDeps(new Client({ connection: clientConnection, namespace }));
  console.log(describeToolIsolation(await probeNamespace()));
  const worker = await Worker.create({
    connection: nativeConnection,
    namespace,
    ...defaults,
    activities: defaults.activities(deps),
    taskQueue: options.taskQueue ?? defaults.taskQueue,
    ...options.overrides,
    interceptors: {
      ...options.overrides?.interceptors,
      activity: [trackRunningActivities, ...(options.overrides?.interceptors?.activity ?? [])],
    },
  });
  return {
    worker,
    close: async () => {
      await clientConnection.close();
      await nativeConnection.close();
    },
  };
}

/**
 * `tsx workers/<name>.ts`: when `moduleUrl` is the script node was started with, create the worker, print the
 * banner (tests wait for `codegrep … worker:`), run until SIGINT/SIGTERM (the SDK shuts down gracefully), close.
 * An error nothing caught is logged with the running activity and the worker lives on (workers/process-guard.ts).
 */
export function runWorkerIfMain(moduleUrl: string, create: () => Promise<RunningWorker>, banner: string): void {
  if (!process.argv[1] || path.resolve(process.argv[1]) !== fileURLToPath(moduleUrl)) return;
  const main = async () => {
    guardWorkerProcess();
    const { worker, close } = await create();
    console.log(banner);
    try {
      await worker.run();
    } finally {
      await close();
    }
  };
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? `${error.name}: ${error.message}` : error);
    process.exit(1);
  });
}
