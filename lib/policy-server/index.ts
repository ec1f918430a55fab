// The policy server: one training checkpoint behind an OpenAI-compatible endpoint (vLLM, or trainer/serve.py).
export {
  ADAPTER_WEIGHTS,
  checkpointWeightsFile,
  FULL_WEIGHTS,
  CheckpointChoiceError,
  newestTrainerConfig,
  resolveServedCheckpoint,
  servedModelName,
  type CheckpointChoice,
  type ServedCheckpoint,
} from './served-checkpoint';
export {
  PolicyServerStartError,
  freePort,
  policyServerFiles,
  policyServerLogDir,
  servesCheckpoint,
  startPolicyServer,
  vllmLauncher,
  type PolicyServerBackend,
  type RunningPolicyServer,
  type StartPolicyServerOptions,
} from './policy-server';
export { pullServedCheckpoint } from './pull-checkpoint';
