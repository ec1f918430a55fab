/**
 * Bootstrap defaults for confidence intervals of summary statistics (percentile method): the evaluation
 * config's defaults, and lib/metrics' when a caller passes none (lib/metrics/params.ts re-exports them). They
 * live in schemas/ because a schema's default may import only zod, apache-arrow and other schemas
 * (ARCHITECTURE.md); not paper parameters, so nothing in lib/ is their home.
 */
export const BOOTSTRAP_RESAMPLES = 1000;
export const BOOTSTRAP_CONFIDENCE = 0.95;
export const BOOTSTRAP_SEED = 0x5eed;
