// Every activity the CPU worker registers. Activities are thin adapters over lib/: parse input, call lib/,
// write artifacts, heartbeat.
export { validateConfig } from './validate-config';
export { mine } from './catm-mine';
export { judge } from './catm-judge';
export { weight } from './catm-weight';
export { writeCatmSummary } from './catm-summary';
export { findRunArtifact } from './run-artifact';
export { materializeWorktrees } from './environment-materialize';
export { deriveGroundTruth } from './environment-ground-truth';
export { planDownstream } from './downstream-plan';
export { retrieveDownstreamCandidates } from './downstream-candidates';
export { runDownstreamPair } from './downstream-run';
export { summarizeDownstream } from './downstream-summary';
export { planEvaluation } from './evaluation-plan';
export { evaluateShard } from './evaluation-shard';
export { summarizeEvaluation } from './evaluation-summary';
export { trainSegment } from './training';
export { inspectTrainingRun } from './training-inspect';
export { writeTrainingReport } from './training-report';
export { splitValidation } from './training-validation';
export { recordValidation } from './training-validation-record';
export { publishToStore } from './store-publish'; // the run's artifact store (README "Deployment: several machines")
export { planRftSampling } from './rft-plan'; // the RFT warm start (CodeScout §4.1)
export { sampleRftShard } from './rft-sample';
export { collectRftTrajectories } from './rft-collect';
export { writeRftTrajectories } from './rft-trajectories';
export { fineTuneRft } from './rft-sft'; // registered by the GPU worker (workers/gpu.ts); typed here for workflows
export { servePolicy } from './policy-server'; // registered by the GPU worker (workers/gpu.ts); typed here for workflows
export { reapPolicyServer } from './policy-server-reap'; // GPU worker, likewise
