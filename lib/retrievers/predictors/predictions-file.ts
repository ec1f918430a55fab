import path from 'node:path';
import type { Prediction } from '../../../schemas/predictions';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import { cutPrediction, readPredictionsFile } from '../predictions-file';
import { emptyPrediction, failedPrediction, type OutputShape, type Predictor } from './predictor';

/** An outside system's predictions file; an instance without a line there is a failed prediction. */
export async function predictionsFilePredictor(retriever: Extract<RetrieverConfig, { kind: 'predictions' }>): Promise<Predictor> {
  const file = await readPredictionsFile(retriever.path);
  const byId = new Map<string, Prediction>(file.predictions.map((p) => [p.instanceId, p]));
  // A system that names modules (or functions) for some instances predicts that level: where a line has none,
  // it predicted none there.
  const shape: OutputShape = {
    ranked: true,
    lineRanges: false,
    modules: file.predictions.some((p) => p.modules !== undefined),
    functions: file.predictions.some((p) => p.functions !== undefined),
  };
  const name = path.basename(retriever.path);
  return {
    concurrency: 1,
    async predict(instance) {
      const found = byId.get(instance.instanceId);
      if (!found) return failedPrediction(instance, retriever, shape, `no line for this instance in ${name}`);
      const cut = retriever.k === undefined ? found : cutPrediction(found, retriever.k);
      return {
        ...emptyPrediction(instance, retriever, shape),
        ranked: found.files,
        files: cut.files,
        modules: shape.modules ? (cut.modules ?? []) : null,
        functions: shape.functions ? (cut.functions ?? []) : null,
      };
    },
    close: async () => undefined,
  };
}
