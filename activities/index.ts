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
export { runDownstreamPair } from './downstream-run';
export { summarizeDownstream } from './downstream-summary';
export { planEvaluation } from './evaluation-plan';
export { evaluateShard } from './evaluation-shard';
export { summarizeEvaluation } from './evaluation-summary';
export { trainSegment, inspectTrainingRun } from './training';
export { writeTrainingReport } from './training-report';
export { recordValidation, splitValidation } from './training-validation';
export { publishToStore } from './store-publish'; // store (issue #13)
export { planRftSampling, sampleRftShard, collectRftTrajectories, writeRftTrajectories } from './rft'; // CodeScout §4.1 RFT
export { fineTuneRft } from './rft-sft'; // registered by the GPU worker (workers/gpu.ts); typed here for workflows
export { servePolicy } from './policy-server'; // registered by the GPU worker (workers/gpu.ts); typed here for workflows
