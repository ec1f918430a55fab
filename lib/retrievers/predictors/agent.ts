import { episodeToPredictionRow, runAgentRetriever } from '../../agent';
import { LlmError, LlmRequestRejectedError } from '../../llm/errors';
import { locationsToSets } from '../../metrics/levels';
import type { RetrieverConfig } from '../../../schemas/evaluation';
import {
  emptyPrediction,
  failedPrediction,
  noWorktree,
  PredictorFailure,
  type OutputShape,
  type Predictor,
  type PredictorContext,
} from './predictor';

/**
 * The agent retriever on an OpenAI-compatible endpoint. A request the endpoint rejects fails that instance; a
 * refused key or an unknown model fails the shard without retry; an endpoint that stays unreachable fails it
 * so Temporal retries it later.
 */
export function agentPredictor(retriever: Extract<RetrieverConfig, { kind: 'agent' }>, context: PredictorContext): Predictor {
  const { baseUrl, model, answerFormat } = retriever;
  if (baseUrl === undefined || model === undefined || answerFormat === undefined) {
    // A `policy` retriever reaches a shard only after the evaluation workflow served it and filled these in.
    throw new PredictorFailure(
      'ConfigError',
      true,
      `agent retriever "${retriever.name}": no endpoint${retriever.policy ? ' (its trained policy was not served: run it through the evaluation workflow)' : ''}`,
    );
  }
  const codescout = answerFormat === 'codescout';
  const shape: OutputShape = { ranked: false, lineRanges: !codescout, modules: codescout, functions: codescout };
  const apiKey = retriever.apiKeyEnv ? context.env[retriever.apiKeyEnv]?.trim() || undefined : undefined;
  const endpoint = { baseUrl, model, ...(apiKey ? { apiKey } : {}) };
  return {
    concurrency: retriever.concurrency,
    async predict(instance) {
      if (!instance.worktreePath) return failedPrediction(instance, retriever, shape, noWorktree(instance));
      let result;
      try {
        result = await runAgentRetriever({
          endpoint,
          instance: { instanceId: instance.instanceId, problemStatement: instance.problemStatement, repo: instance.repo },
          worktreeRoot: instance.worktreePath,
          answerFormat,
          ...(retriever.limits ? { limits: retriever.limits } : {}),
          ...(retriever.temperature === undefined ? {} : { temperature: retriever.temperature }),
          ...(retriever.topP === undefined ? {} : { topP: retriever.topP }),
          retry: { timeoutMs: retriever.timeoutMs },
          sandbox: { isolation: context.isolation ?? 'namespace' },
          signal: context.signal,
        });
      } catch (error) {
        if (context.signal.aborted) throw error;
        if (error instanceof LlmRequestRejectedError) return failedPrediction(instance, retriever, shape, error.message);
        if (error instanceof LlmError) {
          throw new PredictorFailure(
            error.failureType,
            error.nonRetryable,
            `agent retriever "${retriever.name}" on instance ${instance.instanceId}: ${error.message}`,
          );
        }
        return failedPrediction(instance, retriever, shape, (error as Error).message);
      }
      const row = episodeToPredictionRow(result, retriever.name);
      const usage = {
        turns: row.turns,
        toolCalls: row.toolCalls,
        promptTokens: row.promptTokens,
        completionTokens: row.completionTokens,
        answerValid: row.answerValid,
        endReason: row.endReason,
      };
      if (codescout) {
        const sets = locationsToSets(row.locations);
        return {
          ...emptyPrediction(instance, retriever, shape),
          ...usage,
          files: [...sets.files],
          modules: [...sets.modules],
          functions: [...sets.functions],
        };
      }
      return { ...emptyPrediction(instance, retriever, shape), ...usage, files: row.files, lineRanges: row.lineRanges };
    },
    close: async () => undefined,
  };
}
