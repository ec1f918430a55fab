export {
  createEpisode,
  episodeToolDefinitions,
  type Episode,
  type AssistantTurn,
  type AssistantToolCall,
  type StepResult,
  type CreateEpisodeOptions,
  type AgentToolDefinition,
  type ToolRunner,
} from './episode';
export { runAgentRetriever, toRequestMessages, type RunAgentRetrieverOptions } from './openai-loop';
export {
  parseQwen3Assistant,
  splitThinking,
  extractToolCalls,
  parseToolCallBlock,
  toolObservationMessage,
  type Qwen3Assistant,
  type Qwen3ParsedToolCall,
} from './qwen3-format';
export { findAnswerBlock, parseCodeGrepAnswer, type AnswerBlock, type ParsedAnswer } from './answer-codegrep';
export { parseLocalizationFinish, localizationFinishToolDefinition } from './answer-codescout';
export { PAPER_AGENT_LIMITS, resolveAgentLimits } from './limits';
export { episodeToPredictionRow } from './prediction-row';
