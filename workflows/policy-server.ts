import {
  ActivityCancellationType,
  ApplicationFailure,
  CancellationScope,
  condition,
  defineSignal,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type * as activities from '../activities';
import type { PolicyServerReady, ServePolicyInput } from '../schemas/policy-server';
import { activityOptions, type TimeoutOverrides } from './activity-options';

/** From the serving activity (activities/policy-server.ts): the endpoint is up (again, after a restart). */
export const policyServerReadySignal = defineSignal<[PolicyServerReady]>('policyServerReady');

export type ServeRequest = Omit<ServePolicyInput, 'ownerWorkflowId' | 'requestId'> & { requestId: string; taskQueue: string };

/**
 * The policy servers one workflow runs, one at a time: `serve` starts the GPU worker's `servePolicy` activity
 * in a scope of its own, waits for its `policyServerReady` signal, runs `body` against the endpoint and
 * cancels the activity when `body` settles, waiting until the server's process group is gone
 * (WAIT_CANCELLATION_COMPLETED), so the next user of the GPU (a training segment, another server) never
 * overlaps it. Cancelling the workflow cancels the scope, and a workflow that ends stops heartbeating the
 * activity's cancellation away too: the server never outlives its owner.
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
    const { servePolicy } = proxyActivities<typeof activities>({
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
    }
  }
}
