// The activity kit: what every activity shares. Activities import this folder and lib/, never each other.
export { ProgressReporter } from './progress';
export {
  configError,
  describedFailure,
  invalidInput,
  nonRetryable,
  rethrowAsFailure,
  rethrowLlmFailure,
  rethrowPredictorFailure,
  type SelfDescribingError,
} from './failures';
export { activityDeps, openRunStore, type ActivityDeps } from './deps';
export { inputSource } from './input-source';
export { captureActivityLog, type ActivityLog, type FallbackLogger } from './activity-log';
