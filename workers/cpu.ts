/**
 * The CPU worker: every workflow and every CPU activity, on task queue `codegrep`.
 * Run it with `npm run worker` (or `codegrep worker`); it stops cleanly on SIGINT/SIGTERM, letting running
 * activities finish within shutdownGraceTime, after which they are retried elsewhere from their heartbeats.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createActivities } from '../activities';
import { temporalConfig } from '../temporal.config';
import { createWorker, runWorkerIfMain, type RunningWorker, type WorkerConnectOptions } from './create-worker';

const here = path.dirname(fileURLToPath(import.meta.url));
export const workflowsPath = path.resolve(here, '../workflows/index.ts');

export type CpuWorkerOptions = WorkerConnectOptions;

export async function createCpuWorker(options: CpuWorkerOptions = {}): Promise<RunningWorker> {
  return createWorker(options, {
    taskQueue: temporalConfig.taskQueues.cpu,
    workflowsPath,
    activities: createActivities,
    shutdownGraceTime: temporalConfig.worker.shutdownGraceTimeMs,
    maxConcurrentActivityTaskExecutions: temporalConfig.worker.maxConcurrentActivities,
  });
}

runWorkerIfMain(
  import.meta.url,
  () => createCpuWorker(),
  `codegrep worker: namespace ${temporalConfig.namespace}, task queue ${temporalConfig.taskQueues.cpu}, server ${temporalConfig.address}`,
);
