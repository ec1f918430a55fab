import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { AgentInstance, AgentLimits, AnswerFormat, ChatMessage, EpisodeResult } from '../../schemas/agent';
import type { ToolName } from '../../schemas/tools';
import { createChatCompletion, type ChatCallOptions } from '../llm/chat';
import { createLlmClient } from '../llm/client';
import type { LlmEndpoint } from '../llm/endpoint';
import type { SandboxOptions } from '../sandbox';
import { createEpisode, type AssistantToolCall, type ToolRunner } from './episode';

/**
 * The agent retriever against any OpenAI-compatible Chat Completions endpoint (vLLM, SGLang, OpenAI) with
 * native tool calling: the episode's tools go in `tools`, parallel calls are allowed, each reply is fed to
 * the episode and its observations are appended until the episode is done. Token counts come from each
 * reply's `usage`. Retries, timeouts and typed failures are lib/llm's: a call that still fails (auth, retries
 * exhausted, abort) rejects with lib/llm's typed error unchanged, and the caller records that instance as failed.
 */

export interface RunAgentRetrieverOptions {
  endpoint: LlmEndpoint;
  instance: AgentInstance;
  worktreeRoot: string;
  answerFormat: AnswerFormat;
  limits?: AgentLimits;
  tools?: readonly ToolName[];
  temperature?: number;
  topP?: number;
  signal?: AbortSignal;
  /** lib/llm retry policy overrides (attempts, per-attempt timeout …). */
  retry?: ChatCallOptions['policy'];
  sandbox?: SandboxOptions;
  toolRunner?: ToolRunner;
}

/** The conversation in the request's shape: only fields every OpenAI-compatible server accepts. */
export function toRequestMessages(messages: readonly ChatMessage[]): ChatCompletionMessageParam[] {
  return messages.map((message): ChatCompletionMessageParam => {
    switch (message.role) {
      case 'system':
      case 'user':
        return { role: message.role, content: message.content };
      case 'assistant':
        return message.tool_calls && message.tool_calls.length > 0
          ? { role: 'assistant', content: message.content, tool_calls: message.tool_calls }
          : { role: 'assistant', content: message.content };
      case 'tool':
        return { role: 'tool', tool_call_id: message.tool_call_id, content: message.content };
    }
  });
}

function readToolCalls(raw: unknown): AssistantToolCall[] | undefined {
  if (!Array.isArray(raw) || raw.length === 0) return undefined;
  return raw.map((call: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }) => ({
    ...(typeof call?.id === 'string' ? { id: call.id } : {}),
    name: typeof call?.function?.name === 'string' ? call.function.name : '',
    arguments: typeof call?.function?.arguments === 'string' ? call.function.arguments : JSON.stringify(call?.function?.arguments ?? {}),
  }));
}

export async function runAgentRetriever(options: RunAgentRetrieverOptions): Promise<EpisodeResult> {
  const episode = createEpisode({
    instance: options.instance,
    worktreeRoot: options.worktreeRoot,
    answerFormat: options.answerFormat,
    ...(options.limits ? { limits: options.limits } : {}),
    ...(options.tools ? { tools: options.tools } : {}),
    sandbox: { ...options.sandbox, ...(options.signal ? { signal: options.signal } : {}) },
    ...(options.toolRunner ? { toolRunner: options.toolRunner } : {}),
  });
  const llm = createLlmClient(options.endpoint);
  const tools = episode.tools as ChatCompletionTool[];
  let completionTokens = 0;

  while (!episode.done) {
    const budget = episode.limits.maxCompletionTokens;
    const remaining = budget === undefined ? undefined : Math.max(1, budget - completionTokens);
    const { completion } = await createChatCompletion(
      llm,
      {
        messages: toRequestMessages(episode.messages),
        tools,
        tool_choice: 'auto',
        parallel_tool_calls: true,
        ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
        ...(options.topP === undefined ? {} : { top_p: options.topP }),
        ...(remaining === undefined ? {} : { max_tokens: remaining }),
      },
      { ...(options.retry ? { policy: options.retry } : {}), ...(options.signal ? { signal: options.signal } : {}) },
    );
    const choice = completion.choices[0]!;
    const message = choice.message as typeof choice.message & { reasoning_content?: unknown; reasoning?: unknown };
    const reasoning =
      typeof message.reasoning_content === 'string'
        ? message.reasoning_content
        : typeof message.reasoning === 'string'
          ? message.reasoning
          : undefined;
    const usage = completion.usage;
    const toolCalls = readToolCalls(message.tool_calls);
    const turnCompletionTokens = usage?.completion_tokens ?? 0;
    completionTokens += turnCompletionTokens;
    await episode.step({
      text: message.content ?? '',
      // Native tool calling. A server started without a tool-call parser returns Qwen3's <tool_call> blocks
      // as text: leaving toolCalls out then lets the episode parse them from the text.
      ...(toolCalls ? { toolCalls } : {}),
      ...(reasoning === undefined ? {} : { reasoning }),
      ...(usage ? { usage: { promptTokens: usage.prompt_tokens ?? 0, completionTokens: turnCompletionTokens } } : {}),
      finishReason: choice.finish_reason,
    });
  }
  return episode.result();
}
