/**
 * The GPU worker: the training activity and the policy server (lib/policy-server), on task queue `codegrep-gpu` (temporal.config.ts
 * `taskQueues.gpu`), one segment at a time. Run it on the GPU node with `npm run worker:gpu`; the workflows
 * and every other activity stay on the CPU worker.
 *
 * On SIGINT/SIGTERM it stops polling and lets the running segment go on for shutdownGraceTime; then the
 * segment is cancelled, stops its trainer with SIGTERM (the trainer checkpoints and exits) and fails the
 * attempt, which a GPU worker retries from that checkpoint. A worker killed outright is noticed by the
 * heartbeat timeout; the retry reaps the trainer it left behind first.
 */
import { createActivities, GPU_ACTIVITY_NAMES, type ActivityDeps } from '../activities';
import { temporalConfig } from '../temporal.config';
import { createWorker, runWorkerIfMain, type RunningWorker, type WorkerConnectOptions } from './create-worker';

export type GpuWorkerOptions = WorkerConnectOptions;

/** The GPU queue's activities, built with the worker's deps. */
export function createGpuActivities(deps: ActivityDeps) {
  const all = createActivities(deps);
  return Object.fromEntries(GPU_ACTIVITY_NAMES.map((name) => [name, all[name]])) as Pick<typeof all, (typeof GPU_ACTIVITY_NAMES)[number]>;
}

export async function createGpuWorker(options: GpuWorkerOptions = {}): Promise<RunningWorker> {
  return createWorker(options, {
    taskQueue: temporalConfig.taskQueues.gpu,
    activities: createGpuActivities,
    // One trainer or one policy server owns the accelerator: never two at once on one node.
    maxConcurrentActivityTaskExecutions: 1,
    shutdownGraceTime: temporalConfig.worker.shutdownGraceTimeMs,
  });
}

runWorkerIfMain(
  import.meta.url,
  () => createGpuWorker(),
  `codegrep gpu worker: namespace ${temporalConfig.namespace}, task queue ${temporalConfig.taskQueues.gpu}, server ${temporalConfig.address}`,
);
