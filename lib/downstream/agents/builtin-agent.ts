import type { ChatCompletion, ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import type { AssistantMessage, ChatMessage, WireToolCall } from '../../../schemas/agent';
import { EDITOR_TOOL_NAME, SUBMIT_TOOL_NAME, type DownstreamEndReason, type DownstreamInstance } from '../../../schemas/downstream';
import { toRequestMessages } from '../../agent/openai-loop';
import { createChatCompletion, type ChatCallOptions } from '../../llm/chat';
import { createLlmClient, type LlmClient } from '../../llm/client';
import type { LlmEndpoint } from '../../llm/endpoint';
import { LlmError, LlmRequestRejectedError } from '../../llm/errors';
import { formatObservation, runTool, type SandboxOptions } from '../../sandbox';
import type { DownstreamAgent, DownstreamAgentResult, DownstreamRunContext } from './agent';
import { BUILTIN_SYSTEM_PROMPT, builtinUserPrompt } from './builtin-prompts';
import { builtinAgentTools } from './builtin-tools';
import { createEditor, type Editor, type EditorOptions } from './editor';
import { PAPER_DOWNSTREAM_AGENT } from '../params';
import { collectWorkspacePatch } from '../runs/workspace-patch';

/**
 * The built-in downstream agent: a plain tool-calling loop on any OpenAI-compatible Chat Completions endpoint
 * (native tool calling), with lib/sandbox's restricted terminal, the `str_replace_editor` of editor.ts and a
 * `submit` tool. One round = one model call; the tool calls of a round run one after another, in order (edits
 * must not race each other or the terminal). The run ends on `submit`, on a reply without a tool call, on a
 * reply cut by the token limit, or after `maxRounds` (CodeGrep §4.1: 100) — and, recorded as such, when the
 * endpoint fails for good. The patch is the checkout's diff against the base commit, new files included.
 */
export interface BuiltinAgentOptions {
  endpoint: LlmEndpoint;
  /** Default 100 (CodeGrep §4.1). */
  maxRounds?: number;
  /** Default 0 (CodeGrep §4.1). */
  temperature?: number;
  /** max_tokens of each call; the server's default when unset. */
  maxTokensPerCall?: number;
  retry?: ChatCallOptions['policy'];
  sandbox?: SandboxOptions;
  /** The editor's isolation and limits (editor.ts); by default writes run in the OS sandbox. */
  editor?: EditorOptions;
  systemPrompt?: string;
  name?: string;
}

/** Rejections that mean the conversation outgrew the model's context (vLLM, SGLang and OpenAI wordings). */
const CONTEXT_OVERFLOW = /context length|context window|maximum context|too many tokens|prompt is too long|input is too long/i;

function readToolCalls(raw: unknown): WireToolCall[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((call: { id?: unknown; function?: { name?: unknown; arguments?: unknown } }, position) => ({
    id: typeof call?.id === 'string' && call.id !== '' ? call.id : `call_${position}`,
    type: 'function' as const,
    function: {
      name: typeof call?.function?.name === 'string' ? call.function.name : '',
      arguments: typeof call?.function?.arguments === 'string' ? call.function.arguments : JSON.stringify(call?.function?.arguments ?? {}),
    },
  }));
}

function positiveInteger(value: number | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`builtin agent: ${name} must be an integer ≥ 1, got ${value}`);
  return value;
}

/** An agent's options, checked and resolved once for all its runs. */
interface AgentSetup {
  options: BuiltinAgentOptions;
  maxRounds: number;
  temperature: number;
  maxTokens: number | undefined;
  llm: LlmClient;
  tools: ChatCompletionTool[];
  systemPrompt: string;
}

export function createBuiltinAgent(options: BuiltinAgentOptions): DownstreamAgent {
  const maxRounds = positiveInteger(options.maxRounds, PAPER_DOWNSTREAM_AGENT.maxRounds, 'maxRounds');
  const temperature = options.temperature ?? PAPER_DOWNSTREAM_AGENT.temperature;
  const maxTokens = options.maxTokensPerCall === undefined ? undefined : positiveInteger(options.maxTokensPerCall, 1, 'maxTokensPerCall');
  const llm = createLlmClient(options.endpoint);
  const tools = builtinAgentTools() as ChatCompletionTool[];
  const systemPrompt = options.systemPrompt ?? BUILTIN_SYSTEM_PROMPT;
  const setup: AgentSetup = { options, maxRounds, temperature, maxTokens, llm, tools, systemPrompt };
  return {
    name: options.name ?? `builtin:${options.endpoint.model}`,
    run: (instance, prompt, ctx) => runEpisode(setup, instance, prompt, ctx),
  };
}

/** One run: rounds of a model call and its tool calls until an end reason of the header, then the checkout's patch. */
async function runEpisode(
  setup: AgentSetup,
  instance: DownstreamInstance,
  prompt: string,
  ctx: DownstreamRunContext,
): Promise<DownstreamAgentResult> {
  const trajectory: ChatMessage[] = [
    { role: 'system', content: setup.systemPrompt },
    { role: 'user', content: builtinUserPrompt(instance.repo, prompt) },
  ];
  let rounds = 0;
  let inputTokens = 0;
  let outputTokens = 0;
  let endReason: DownstreamEndReason = 'round_limit';
  let error: string | undefined;
  // One editor per episode: its created-file limit counts this run's creates.
  const editor = createEditor(ctx.workdir, setup.options.editor);

  while (rounds < setup.maxRounds) {
    const reply = await requestRound(setup, trajectory, ctx);
    if ('failure' in reply) {
      endReason = reply.endReason;
      error = reply.failure;
      break;
    }
    const { completion } = reply;
    rounds += 1;
    inputTokens += completion.usage?.prompt_tokens ?? 0;
    outputTokens += completion.usage?.completion_tokens ?? 0;
    const choice = completion.choices[0]!;
    const { assistant, calls } = assistantTurn(choice.message);
    trajectory.push(assistant);

    if (calls.length === 0) {
      endReason = choice.finish_reason === 'length' ? 'length' : 'no_tool_call';
      break;
    }
    const { messages, submitted } = await runTools(setup.options.sandbox, calls, ctx, editor);
    trajectory.push(...messages);
    if (submitted) {
      endReason = 'submitted';
      break;
    }
  }

  const { patch, dropped } = await collectWorkspacePatch(ctx.workdir, ctx.baseCommit, ctx.signal ? { signal: ctx.signal } : {});
  return {
    patch,
    patchDropped: dropped,
    rounds,
    inputTokens,
    outputTokens,
    trajectory,
    endReason,
    ...(error === undefined ? {} : { error }),
  };
}

/**
 * One model call on the conversation so far. A failure of the endpoint ends the run with its reason (the context
 * outgrown, or the endpoint failing for good); cancellation and anything that is not an endpoint failure throw.
 */
async function requestRound(
  setup: AgentSetup,
  trajectory: ChatMessage[],
  ctx: DownstreamRunContext,
): Promise<{ completion: ChatCompletion } | { endReason: DownstreamEndReason; failure: string }> {
  try {
    const { completion } = await createChatCompletion(
      setup.llm,
      {
        messages: toRequestMessages(trajectory) as ChatCompletionMessageParam[],
        tools: setup.tools,
        tool_choice: 'auto',
        temperature: setup.temperature,
        ...(setup.maxTokens === undefined ? {} : { max_tokens: setup.maxTokens }),
      },
      { ...(setup.options.retry ? { policy: setup.options.retry } : {}), ...(ctx.signal ? { signal: ctx.signal } : {}) },
    );
    return { completion };
  } catch (failure) {
    if (ctx.signal?.aborted || !(failure instanceof LlmError)) throw failure;
    const endReason = failure instanceof LlmRequestRejectedError && CONTEXT_OVERFLOW.test(failure.message) ? 'context_limit' : 'llm_error';
    return { endReason, failure: failure.message };
  }
}

/** The reply as the trajectory's assistant message (its reasoning kept when the server sends one), and its tool calls. */
function assistantTurn(message: ChatCompletion['choices'][number]['message']): { assistant: AssistantMessage; calls: WireToolCall[] } {
  const calls = readToolCalls(message.tool_calls);
  const assistant: AssistantMessage = { role: 'assistant', content: message.content ?? '' };
  const reasoning = (message as { reasoning_content?: unknown }).reasoning_content;
  if (typeof reasoning === 'string' && reasoning !== '') assistant.reasoning_content = reasoning;
  if (calls.length > 0) assistant.tool_calls = calls;
  return { assistant, calls };
}

/** A round's tool calls, one after another; after `submit`, the rest of the round is answered without running. */
async function runTools(
  sandbox: SandboxOptions | undefined,
  calls: WireToolCall[],
  ctx: DownstreamRunContext,
  editor: Editor,
): Promise<{ messages: ChatMessage[]; submitted: boolean }> {
  const messages: ChatMessage[] = [];
  let submitted = false;
  for (const call of calls) {
    const name = call.function.name;
    let content: string;
    if (submitted) content = 'Not run: the work was already submitted in this turn.';
    else if (name === SUBMIT_TOOL_NAME) {
      submitted = true;
      content = 'Submitted.';
    } else if (name === EDITOR_TOOL_NAME) {
      content = formatObservation(await editor.run(call.function.arguments));
    } else if (name === 'terminal') {
      content = formatObservation(
        await runTool(ctx.workdir, 'terminal', call.function.arguments, {
          ...sandbox,
          ...(ctx.signal ? { signal: ctx.signal } : {}),
        }),
      );
    } else {
      content = `Error: unknown tool ${JSON.stringify(name)}; available tools: terminal, ${EDITOR_TOOL_NAME}, ${SUBMIT_TOOL_NAME}`;
    }
    messages.push({ role: 'tool', tool_call_id: call.id, name, content });
  }
  return { messages, submitted };
}
