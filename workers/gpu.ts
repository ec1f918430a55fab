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
import { servePolicy } from '../activities/policy-server';
import { reapPolicyServer } from '../activities/policy-server-reap';
import { fineTuneRft } from '../activities/rft-sft';
import { trainSegment } from '../activities/training';
import { setNodeDataDir } from '../lib/store-sync';
import { temporalConfig } from '../temporal.config';
import { createWorker, runWorkerIfMain, type RunningWorker, type WorkerConnectOptions } from './create-worker';

export type GpuWorkerOptions = WorkerConnectOptions & {
  /**
   * This node's own data dir (README "Deployment: several machines"): with a run `store`, segments work in `<dataDir>/<runId>` and keep bare
   * clones and worktrees in `<dataDir>/repos`, `<dataDir>/worktrees`. Default: CODEGREP_DATA_DIR, else the run
   * directory the workflow names (a shared mount, as without a store).
   */
  dataDir?: string;
};

export async function createGpuWorker(options: GpuWorkerOptions = {}): Promise<RunningWorker> {
  if (options.dataDir) setNodeDataDir(options.dataDir);
  return createWorker(options, {
    taskQueue: temporalConfig.taskQueues.gpu,
    activities: { trainSegment, servePolicy, reapPolicyServer, fineTuneRft },
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
