import type { AgentPredictionRow, EpisodeResult } from '../../schemas/agent';

/**
 * One row of the agent predictions Parquet (schemas/agent.ts `agentPredictionsArrowSchema`) from an episode
 * result. An invalid or missing answer gives empty lists, so every metric scores it as "predicted nothing".
 */
export function episodeToPredictionRow(result: EpisodeResult, retriever: string): AgentPredictionRow {
  if (retriever.trim() === '') throw new TypeError('episodeToPredictionRow: retriever must name the retriever (e.g. "codegrep-v3")');
  const answer = result.answer;
  const locations = answer && 'locations' in answer ? answer.locations : [];
  const files = answer === null ? [] : 'files' in answer ? answer.files : [...new Set(locations.map((l) => l.file))];
  return {
    instanceId: result.instanceId,
    retriever,
    answerFormat: result.answerFormat,
    files,
    lineRanges: answer && 'lineRanges' in answer ? answer.lineRanges : [],
    locations: locations.map((l) => ({ file: l.file, class_name: l.class_name ?? null, function_name: l.function_name ?? null })),
    turns: result.turns,
    toolCalls: result.toolCalls,
    finishCalls: result.finishCalls,
    promptTokens: result.promptTokens,
    completionTokens: result.completionTokens,
    answerValid: result.answerValid,
    answerError: result.answerError ?? null,
    endReason: result.endReason,
  };
}
