import {
  ActivityCancellationType,
  ActivityFailure,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  log,
  patched,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedConfig } from '../lib/config';
import type { AgentRetrieverConfig, PolicyServerConfig } from '../schemas/evaluation/config';
import type { CheckpointChoice, PolicyServerReady, ServePolicyInput, TrainedPolicy } from '../schemas/policy-server';
import { temporalConfig } from '../temporal.config';
import { activityOptions, type TimeoutOverrides } from './activity-options';

/** From the serving activity (activities/policy-server.ts): the endpoint is up (again, after a restart). */
export const policyServerReadySignal = defineSignal<[PolicyServerReady]>('policyServerReady');

export type ServeRequest = Omit<ServePolicyInput, 'ownerWorkflowId' | 'requestId'> & { requestId: string; taskQueue: string };

/** What a stage asks to be served: an evaluation retriever's or a downstream source's `policy` and `checkpoint`. */
export interface TrainedPolicyChoice {
  /** The retriever or configuration that asks; names its server among the stage's. */
  name: string;
  policy: TrainedPolicy;
  checkpoint?: CheckpointChoice;
}

/**
 * The serving request of a trained policy (README "Serving and evaluating the trained policy"): `trained` is
 * this run's own training (in a pipeline, the checkpoints its training stage wrote), `{ run }` an earlier run
 * in the same data dir; the checkpoint defaults to `best` when this run validates, else `latest`. The GPU task
 * queue, the Python and the store follow the training settings unless `serving` sets them.
 */
export function policyServeRequest(config: ResolvedConfig, choice: TrainedPolicyChoice, serving: PolicyServerConfig): ServeRequest {
  const own = choice.policy === 'trained';
  const runId = own ? config.runId : (choice.policy as Exclude<TrainedPolicy, 'trained'>).run;
  const checkpoint =
    (own ? undefined : (choice.policy as Exclude<TrainedPolicy, 'trained'>).checkpoint) ??
    choice.checkpoint ??
    (own && config.training?.validation ? 'best' : 'latest');
  return {
    requestId: `${choice.name}@${runId}:${String(checkpoint)}`,
    taskQueue: serving.gpuTaskQueue ?? config.training?.gpuTaskQueue ?? temporalConfig.taskQueues.gpu,
    runId,
    runDir: own ? config.runDir : `${config.dataDir}/${runId}`,
    store: config.store ?? null,
    checkpoint,
    python: serving.python ?? config.training?.python ?? '.venv/bin/python',
    backend: serving.backend,
    host: serving.host,
    readyTimeoutMs: serving.readyTimeoutMs,
  };
}

/** What an agent retriever sets itself that the served checkpoint would otherwise fill in. */
type OwnSettings = Pick<AgentRetrieverConfig, 'kind' | 'answerFormat' | 'limits'>;

/**
 * The agent retriever as it asks a served checkpoint (an evaluation's shards, a downstream `agent` source): the
 * served endpoint, and the checkpoint's own answer format and turn limit (from its training config) unless the
 * retriever sets them, which is then an override the evaluation summary keeps.
 */
export function servedRetriever<R extends OwnSettings>(retriever: R, ready: PolicyServerReady) {
  return {
    ...retriever,
    baseUrl: ready.baseUrl,
    model: ready.model,
    answerFormat: retriever.answerFormat ?? ready.trainedWith.answerFormat,
    limits: { ...retriever.limits, maxTurns: retriever.limits?.maxTurns ?? ready.trainedWith.maxTurns },
    served: {
      runId: ready.runId,
      step: ready.step,
      adapterSha256: ready.adapterSha256,
      baseModel: ready.baseModel,
      model: ready.model,
      baseUrl: ready.baseUrl,
      backend: ready.backend,
      requestLog: ready.requestLog,
    },
  };
}

/**
 * The policy servers one workflow runs, one at a time: `serve` starts the GPU worker's `servePolicy` activity
 * in a scope of its own, waits for its `policyServerReady` signal, runs `body` against the endpoint and
 * cancels the activity when `body` settles, waiting until the server's process group is gone
 * (WAIT_CANCELLATION_COMPLETED), so the next user of the GPU (a training segment, another server) never
 * overlaps it. Cancelling the workflow cancels the scope, and a workflow that ends stops heartbeating the
 * activity's cancellation away too. Once the scope settled, `reapPolicyServer` on the same queue stops a
 * server its lost attempt left behind (a GPU worker killed while its server answered: the server runs on in
 * its own process group, and the cancelled attempt is never retried, so no retry reaps it): the server never
 * outlives its owner.
 */
export class PolicyServers {
  private readonly ready = new Map<string, PolicyServerReady>();

  constructor(private readonly overrides: TimeoutOverrides) {
    setHandler(policyServerReadySignal, (signal) => {
      this.ready.set(signal.requestId, signal);
    });
  }

  async serve<T>(request: ServeRequest, body: (served: PolicyServerReady) => Promise<T>): Promise<T> {
    const { taskQueue, ...input } = request;
    const { servePolicy } = proxyActivities<Activities>({
      ...activityOptions('policyServer', this.overrides),
      taskQueue,
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    });
    const scope = new CancellationScope();
    let failure: unknown = null;
    let ended = false;
    const serving = scope
      .run(() => servePolicy({ ...input, ownerWorkflowId: workflowInfo().workflowId }))
      .then(
        () => undefined,
        (error: unknown) => {
          failure = error;
        },
      )
      .finally(() => {
        ended = true;
      });
    await condition(() => this.ready.has(request.requestId) || ended);
    const served = this.ready.get(request.requestId);
    if (!served) {
      if (failure) throw failure;
      throw ApplicationFailure.create({
        type: 'PolicyServerEnded',
        message: `the policy server for ${request.runId} ended before it was ready`,
      });
    }
    try {
      return await body(served);
    } finally {
      scope.cancel();
      await CancellationScope.nonCancellable(() => serving);
      // Histories recorded before the reap replay without it.
      if (patched('reap-policy-server-after-serving')) await CancellationScope.nonCancellable(() => this.reap(request, served));
    }
  }

  /**
   * Reaps the served checkpoint's server on the GPU queue, if a lost attempt left it. Bounded (schedule to close
   * = the short start-to-close): with no GPU worker left to run it, the stage still ends, with a warning.
   */
  private async reap(request: ServeRequest, served: PolicyServerReady): Promise<void> {
    const options = activityOptions('short', this.overrides);
    const { reapPolicyServer } = proxyActivities<Activities>({
      ...options,
      taskQueue: request.taskQueue,
      scheduleToCloseTimeout: options.startToCloseTimeout,
    });
    try {
      const reaped = await reapPolicyServer({ runId: request.runId, runDir: request.runDir, store: request.store, step: served.step });
      if (reaped.action !== 'none') log.warn('policy server: reaped after its scope settled', { requestId: request.requestId, ...reaped });
    } catch (error) {
      if (!(error instanceof ActivityFailure)) throw error;
      log.warn('policy server: could not reap after its scope settled', { requestId: request.requestId, error: error.message });
    }
  }
}
