export { mcnemarExact, binomialLowerTailHalf, type McNemarResult } from './mcnemar';
export { pairedSignFlipTest, SIGN_FLIP_RESAMPLES, SIGN_FLIP_SEED, type PairedTestResult } from './paired-test';
export { splitPaired, pairedMeans, type PairedSplit, type PairedMeans } from './paired';
// Bootstrap intervals are lib/metrics' (one implementation for the whole project).
export { bootstrapCI, type BootstrapOptions, type ConfidenceInterval } from '../metrics/summary';
