// Every activity a worker registers, built with the worker's deps (activities/kit/deps.ts): the dependency-injection
// idiom of Temporal's TypeScript samples (`activities-dependency-injection`). Activities are thin adapters over lib/:
// parse input, call lib/, write artifacts, heartbeat. An activity that needs a dep exports `make<Name>(deps)`; one
// that needs none exports itself. The keys below are the registered activity names: recorded histories name them.
import type { ActivityDeps } from './kit';
import { validateConfig } from './validate-config';
import { mine } from './catm-mine';
import { makeJudge } from './catm-judge';
import { weight } from './catm-weight';
import { writeCatmSummary } from './catm-summary';
import { findRunArtifact } from './run-artifact';
import { materializeWorktrees } from './environment-materialize';
import { deriveGroundTruth } from './environment-ground-truth';
import { planDownstream } from './downstream-plan';
import { makeRetrieveDownstreamCandidates } from './downstream-candidates';
import { makeRunDownstreamPair } from './downstream-run';
import { summarizeDownstream } from './downstream-summary';
import { planEvaluation } from './evaluation-plan';
import { makeEvaluateShard } from './evaluation-shard';
import { summarizeEvaluation } from './evaluation-summary';
import { makeTrainSegment } from './training';
import { makeInspectTrainingRun } from './training-inspect';
import { makeWriteTrainingReport } from './training-report';
import { splitValidation } from './training-validation';
import { recordValidation } from './training-validation-record';
import { makePublishToStore } from './store-publish';
import { planRftSampling } from './rft-plan';
import { makeSampleRftShard } from './rft-sample';
import { collectRftTrajectories } from './rft-collect';
import { writeRftTrajectories } from './rft-trajectories';
import { makeFineTuneRft } from './rft-sft';
import { makeServePolicy } from './policy-server';
import { makeReapPolicyServer } from './policy-server-reap';

export { activityDeps, type ActivityDeps } from './kit';

/** Every activity, by its registered name, with `deps` injected. */
export function createActivities(deps: ActivityDeps) {
  return {
    validateConfig,
    mine,
    judge: makeJudge(deps),
    weight,
    writeCatmSummary,
    findRunArtifact,
    materializeWorktrees,
    deriveGroundTruth,
    planDownstream,
    retrieveDownstreamCandidates: makeRetrieveDownstreamCandidates(deps),
    runDownstreamPair: makeRunDownstreamPair(deps),
    summarizeDownstream,
    planEvaluation,
    evaluateShard: makeEvaluateShard(deps),
    summarizeEvaluation,
    trainSegment: makeTrainSegment(deps),
    inspectTrainingRun: makeInspectTrainingRun(deps),
    writeTrainingReport: makeWriteTrainingReport(deps),
    splitValidation,
    recordValidation,
    publishToStore: makePublishToStore(deps), // the run's artifact store (README "Deployment: several machines")
    planRftSampling, // the RFT warm start (CodeScout §4.1)
    sampleRftShard: makeSampleRftShard(deps),
    collectRftTrajectories,
    writeRftTrajectories,
    fineTuneRft: makeFineTuneRft(deps), // registered by the GPU worker (workers/gpu.ts); typed here for workflows
    servePolicy: makeServePolicy(deps), // registered by the GPU worker (workers/gpu.ts); typed here for workflows
    reapPolicyServer: makeReapPolicyServer(deps), // GPU worker, likewise
  };
}

/** The activities' interface, for workflows' `proxyActivities<Activities>` (import type only). */
export type Activities = ReturnType<typeof createActivities>;

/** The activities the GPU worker (task queue `codegrep-gpu`) registers; everything else runs on the CPU worker. */
export const GPU_ACTIVITY_NAMES = [
  'trainSegment',
  'servePolicy',
  'reapPolicyServer',
  'fineTuneRft',
] as const satisfies readonly (keyof Activities)[];
