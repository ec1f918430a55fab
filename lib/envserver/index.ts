export { recipeDefinition, type RecipeDefinition } from './recipes';
export {
  loadEnvSamples,
  envSampleFromRow,
  type EnvSample,
  type RewardTargets,
  type LoadedEnvSamples,
  type LoadEnvSamplesOptions,
  type SkippedSample,
} from './env-samples';
export { scoreEpisode, type EpisodeActivity, type EpisodeScore, type ScoreOptions } from './score-episode';
export { createTrainingEnvironment, type TrainingEnvironment, type TrainingEnvironmentOptions, type EnvironmentStats } from './environment';
export { startEnvServer, type EnvServer, type EnvServerOptions } from './http-server';
export {
  EnvRequestError,
  OpenRequestSchema,
  StepRequestSchema,
  CloseRequestSchema,
  type OpenResponse,
  type StepResponse,
  type CloseResponse,
  type OpenedEpisode,
  type StepResultBody,
  type CloseResultBody,
} from './protocol';
