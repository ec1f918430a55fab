import type { RetrieverConfig } from '../../../schemas/evaluation';
import { agentPredictor } from './agent';
import { bm25Predictor } from './bm25';
import { densePredictor } from './dense';
import type { Predictor, PredictorContext } from './predictor';
import { predictionsFilePredictor } from './predictions-file';

export { PredictorFailure, type Predictor, type PredictorContext } from './predictor';

/**
 * One predictor per retriever kind, opened once per shard: BM25 (CodeGrep App. E), the dense embedding
 * retriever, the agent on an OpenAI-compatible endpoint, and an outside system's predictions file. A failure
 * that concerns one instance (no worktree, a request the endpoint rejects, no line in the predictions file)
 * becomes that instance's failed row; one that concerns every instance (a refused API key, a model the
 * endpoint does not serve) fails the shard at once without retry; an endpoint that stays unreachable fails
 * the shard so Temporal retries it later.
 */
export async function openPredictor(retriever: RetrieverConfig, context: PredictorContext): Promise<Predictor> {
  switch (retriever.kind) {
    case 'bm25':
      return bm25Predictor(retriever, context);
    case 'dense':
      return densePredictor(retriever, context);
    case 'agent':
      return agentPredictor(retriever, context);
    case 'predictions':
      return predictionsFilePredictor(retriever);
  }
}
