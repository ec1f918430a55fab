// Run-config resolution: the zod-validated config with every path made absolute. Used by the validateConfig
// activity (first activity of every workflow) and by the CLI before it starts anything.
export { resolveConfig, type ResolvedConfig } from './resolve-config';
export { resolveDownstreamPaths } from './downstream-paths';
export { resolveEvaluationPaths } from './evaluation-paths';
export { resolveTrainingPaths } from './training-paths';
