import path from 'node:path';
import type { ResolvedTrainingConfig, TrainingConfig } from '../../schemas/training/config';
import type { SandboxConfig } from '../../schemas/sandbox';
import { temporalConfig } from '../../temporal.config';

/**
 * The training section with its paths made absolute against `baseDir` (the worker's working directory) and
 * the GPU task queue filled in from temporal.config.ts. Paths are not checked here: the model directory and
 * the Python live on the GPU node, where the segment activity checks them.
 */
export function resolveTrainingPaths(training: TrainingConfig, baseDir: string, sandbox: SandboxConfig): ResolvedTrainingConfig {
  return {
    ...training,
    sandbox,
    modelDir: path.resolve(baseDir, training.modelDir),
    python: path.resolve(baseDir, training.python),
    gpuTaskQueue: training.gpuTaskQueue ?? temporalConfig.taskQueues.gpu,
  };
}
