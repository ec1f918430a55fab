import { statSync } from 'node:fs';
import path from 'node:path';
import {
  AgentInstanceSchema,
  AnswerFormatSchema,
  LOCALIZATION_FINISH_TOOL_NAME,
  type AgentAnswer,
  type AgentInstance,
  type AgentLimits,
  type AnswerFormat,
  type AssistantMessage,
  type ChatMessage,
  type EndReason,
  type EpisodeResult,
  type ResolvedAgentLimits,
  type WireToolCall,
} from '../../schemas/agent';
import {
  CODEGREP_TOOL_NAMES,
  TERMINAL_TOOL_NAMES,
  ToolNameSchema,
  toolDefinitions,
  type ToolName,
  type ToolResult,
} from '../../schemas/tools';
import { formatObservation, runTool, type SandboxOptions } from '../sandbox';
import { findAnswerBlock, parseCodeGrepAnswer, type ParsedAnswer } from './answer-codegrep';
import { localizationFinishToolDefinition, parseLocalizationFinish } from './answer-codescout';
import { resolveAgentLimits } from './limits';
import { droppedCallNotice, lastTurnReminder, systemPrompt, userPrompt } from './prompts';
import { extractToolCalls, splitThinking, toolObservationMessage } from './qwen3-format';

/**
 * One agent-retriever rollout as a transport-agnostic state machine (docs/design.md "Tools"; CodeGrep §3.2,
 * App. A.1; CodeScout §3.2–3.3). Whoever talks to the model (lib/agent/openai-loop.ts over an OpenAI-compatible
 * endpoint, or the GPU trainer's environment server with raw Qwen3 text) feeds each assistant reply to
 * `step()` and sends back the observations it returns, until `done`.
 *
 * Rules: a turn is one assistant reply. Up to `maxToolCallsPerTurn` calls of a turn run concurrently; each
 * further call gets an observation saying it was not run. The rollout ends on an answer (CodeGrep's
 * `<answer>` block, CodeScout's `localization_finish` call), a reply without tool calls, an exhausted
 * completion budget, or after `maxTurns` turns; the observations of the second-to-last turn tell the model
 * that its next turn is the last and must answer. Tool calls in a reply that ends the rollout are not run.
 * Nothing the model sends makes `step()` throw: bad arguments, unknown tools and unreadable tool-call blocks
 * become error observations, a bad answer an invalid one.
 */

export interface AssistantToolCall {
  /** The call id from the server; generated when absent (raw Qwen3 text has none). */
  id?: string;
  name: string;
  /** JSON text of the arguments, as OpenAI sends them. */
  arguments: string;
}

export interface AssistantTurn {
  /** The reply text. Without `toolCalls`, tool calls are parsed out of it (Qwen3 `<tool_call>` blocks). */
  text: string;
  /** Calls already parsed by the server (native tool calling). */
  toolCalls?: AssistantToolCall[];
  /** Reasoning the server returned separately (vLLM/SGLang `reasoning_content`). */
  reasoning?: string;
  /** This reply's token counts (the server's `usage`, or the trainer's own counts). */
  usage?: { promptTokens: number; completionTokens: number };
  /** `'length'` means generation stopped at its token limit: the completion budget is spent. */
  finishReason?: string | null;
}

export interface StepResult {
  /** Messages to append to the conversation before the next reply: `tool` messages, then any `user` reminder. */
  observations: ChatMessage[];
  done: boolean;
  endReason?: EndReason;
}

export interface AgentToolDefinition {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export type ToolRunner = (root: string, name: string, rawArgs: unknown, options?: SandboxOptions) => Promise<ToolResult>;

export interface CreateEpisodeOptions {
  instance: AgentInstance;
  /** The instance's git worktree; every tool runs inside it. */
  worktreeRoot: string;
  answerFormat: AnswerFormat;
  limits?: AgentLimits;
  /** Sandbox tools offered; default grep/glob/read for CodeGrep, the terminal for CodeScout. */
  tools?: readonly ToolName[];
  /** Passed to every tool call (engine, timeout, cancellation). */
  sandbox?: SandboxOptions;
  /** Runs one tool call; lib/sandbox's runTool unless a caller wraps it (to observe or throttle calls). */
  toolRunner?: ToolRunner;
}

export interface Episode {
  readonly instance: AgentInstance;
  readonly answerFormat: AnswerFormat;
  readonly limits: ResolvedAgentLimits;
  /** The conversation's opening: system prompt, then the user prompt with the issue. */
  readonly initialMessages: readonly ChatMessage[];
  /** Tool definitions to offer the model (OpenAI function tools; the Qwen3 template renders the same). */
  readonly tools: readonly AgentToolDefinition[];
  /** The conversation so far: the opening, then each reply and its observations (what the next request sends). */
  readonly messages: readonly ChatMessage[];
  /** Turns taken so far. */
  readonly turn: number;
  readonly done: boolean;
  step(reply: AssistantTurn): Promise<StepResult>;
  /** The outcome; only once `done`. */
  result(): EpisodeResult;
}

interface PendingCall {
  id: string;
  name: string;
  arguments: string;
  /** Set for a `<tool_call>` block that could not be read: the error observation's text. */
  malformed?: string;
}

function defaultTools(format: AnswerFormat): readonly ToolName[] {
  return format === 'codegrep' ? CODEGREP_TOOL_NAMES : TERMINAL_TOOL_NAMES;
}

/** The tool definitions an episode offers (its sandbox tools, and `localization_finish` for CodeScout). */
export function episodeToolDefinitions(format: AnswerFormat, toolNames: readonly ToolName[] = defaultTools(format)): AgentToolDefinition[] {
  return [...toolDefinitions(toolNames), ...(format === 'codescout' ? [localizationFinishToolDefinition()] : [])];
}

function checkedTokens(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0) throw new RangeError(`step(): usage.${what} must be a non-negative integer, got ${value}`);
  return value;
}

function errorObservation(message: string): string {
  return formatObservation({ status: 'error', output: '', message });
}

export function createEpisode(options: CreateEpisodeOptions): Episode {
  const instanceCheck = AgentInstanceSchema.safeParse(options.instance);
  if (!instanceCheck.success) {
    const problems = instanceCheck.error.issues.map((i) => `${i.path.join('.') || 'instance'}: ${i.message}`).join('; ');
    throw new TypeError(`createEpisode: instance is invalid: ${problems}`);
  }
  const instance = instanceCheck.data;
  const format = AnswerFormatSchema.safeParse(options.answerFormat);
  if (!format.success)
    throw new TypeError(`createEpisode: answerFormat must be "codegrep" or "codescout", got ${JSON.stringify(options.answerFormat)}`);
  const answerFormat = format.data;
  const limits = resolveAgentLimits(options.limits);
  const root = path.resolve(options.worktreeRoot);
  let isDirectory: boolean;
  try {
    isDirectory = statSync(root).isDirectory();
  } catch {
    isDirectory = false;
  }
  if (!isDirectory) throw new Error(`createEpisode: worktreeRoot ${root} (instance ${instance.instanceId}) is not an existing directory`);
  const toolNames = [...new Set(options.tools ?? defaultTools(answerFormat))].map((name) => {
    const parsed = ToolNameSchema.safeParse(name);
    if (!parsed.success)
      throw new TypeError(`createEpisode: unknown tool ${JSON.stringify(name)} (known: ${ToolNameSchema.options.join(', ')})`);
    return parsed.data;
  });
  const runner: ToolRunner = options.toolRunner ?? runTool;
  const sandbox = options.sandbox ?? {};

  const tools = episodeToolDefinitions(answerFormat, toolNames);
  const offered = new Set<string>(toolNames);
  const availableList = tools.map((t) => t.function.name).join(', ');
  const initialMessages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(answerFormat, toolNames, limits) },
    { role: 'user', content: userPrompt(instance) },
  ];

  const trajectory: ChatMessage[] = [...initialMessages];
  const toolCallsPerTurn: number[] = [];
  let turns = 0;
  let toolCalls = 0;
  let toolCallsDropped = 0;
  let toolErrors = 0;
  let finishCalls = 0;
  let promptTokens = 0;
  let completionTokens = 0;
  let endReason: EndReason | undefined;
  let answer: AgentAnswer | null = null;
  let answerError: string | undefined;
  let stepping = false;

  function end(reason: EndReason, parsed?: ParsedAnswer<AgentAnswer>): StepResult {
    endReason = reason;
    if (parsed?.ok) answer = parsed.answer;
    else if (parsed) answerError = parsed.error;
    toolCallsPerTurn.push(0);
    return { observations: [], done: true, endReason: reason };
  }

  async function runCall(call: PendingCall): Promise<{ message: ChatMessage; failed: boolean }> {
    const name = call.name === '' ? undefined : call.name;
    const reply = (content: string, failed: boolean) => ({
      message: toolObservationMessage({ toolCallId: call.id, ...(name === undefined ? {} : { name }), content }),
      failed,
    });
    if (call.malformed !== undefined) return reply(errorObservation(call.malformed), true);
    if (call.name === LOCALIZATION_FINISH_TOOL_NAME || !offered.has(call.name)) {
      return reply(errorObservation(`unknown tool ${JSON.stringify(call.name)}; available tools: ${availableList}`), true);
    }
    try {
      const result = await runner(root, call.name, call.arguments, sandbox);
      return reply(formatObservation(result), result.status === 'error');
    } catch (error) {
      // runTool never throws; a wrapped runner might, and one broken call must not lose the turn.
      return reply(errorObservation(`the tool failed: ${error instanceof Error ? error.message : String(error)}`), true);
    }
  }

  function pendingCalls(reply: AssistantTurn, visible: string, turn: number): { content: string; calls: PendingCall[] } {
    const generatedId = (index: number) => `call_${turn}_${index}`;
    if (reply.toolCalls !== undefined) {
      const calls = reply.toolCalls.map((call, index) => ({
        id: typeof call.id === 'string' && call.id !== '' ? call.id : generatedId(index),
        name: typeof call.name === 'string' ? call.name.trim() : '',
        arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {}),
      }));
      return { content: visible.trim(), calls };
    }
    const parsed = extractToolCalls(visible);
    const calls = parsed.toolCalls.map((call, index): PendingCall =>
      call.kind === 'call'
        ? { id: generatedId(index), name: call.name, arguments: call.arguments }
        : { id: generatedId(index), name: call.name ?? '', arguments: call.raw, malformed: call.error },
    );
    return { content: parsed.rest.trim(), calls };
  }

  async function step(reply: AssistantTurn): Promise<StepResult> {
    if (endReason !== undefined) throw new Error(`step(): the episode of ${instance.instanceId} is already done (${endReason})`);
    if (stepping) throw new Error(`step(): the previous step of ${instance.instanceId} is still running`);
    if (reply === null || typeof reply !== 'object' || typeof reply.text !== 'string') {
      throw new TypeError('step(): reply must be an object with a string `text`');
    }
    stepping = true;
    try {
      turns += 1;
      const turn = turns;
      if (reply.usage) {
        promptTokens += checkedTokens(reply.usage.promptTokens, 'promptTokens');
        completionTokens += checkedTokens(reply.usage.completionTokens, 'completionTokens');
      }
      const thinking = splitThinking(reply.text);
      const { content, calls } = pendingCalls(reply, thinking.rest, turn);
      const reasoning = [reply.reasoning?.trim(), thinking.reasoning].filter((r): r is string => !!r).join('\n\n');
      const wireCalls: WireToolCall[] = calls.map((c) => ({
        id: c.id,
        type: 'function',
        function: { name: c.name, arguments: c.arguments },
      }));
      const assistant: AssistantMessage = {
        role: 'assistant',
        content,
        ...(reasoning === '' ? {} : { reasoning_content: reasoning }),
        ...(wireCalls.length === 0 ? {} : { tool_calls: wireCalls }),
      };
      trajectory.push(assistant);

      const truncated = reply.finishReason === 'length';
      const budgetSpent = truncated || (limits.maxCompletionTokens !== undefined && completionTokens >= limits.maxCompletionTokens);

      if (answerFormat === 'codegrep') {
        const block = findAnswerBlock(content);
        if (block.kind === 'complete') {
          const parsed = parseCodeGrepAnswer(block.body, root);
          return end(parsed.ok ? 'answer' : 'invalid_answer', parsed);
        }
        if (block.kind === 'unterminated') {
          if (truncated) return end('budget');
          return end('invalid_answer', { ok: false, error: 'the <answer> block has no closing </answer>' });
        }
      } else {
        const finishes = calls.filter((c) => c.name === LOCALIZATION_FINISH_TOOL_NAME);
        if (finishes.length > 0) {
          finishCalls += finishes.length;
          if (finishes.length > 1) {
            return end('invalid_answer', {
              ok: false,
              error: `${LOCALIZATION_FINISH_TOOL_NAME} was called ${finishes.length} times; it must be called exactly once`,
            });
          }
          const finish = finishes[0]!;
          if (finish.malformed !== undefined) {
            if (truncated) return end('budget');
            return end('invalid_answer', { ok: false, error: finish.malformed });
          }
          const parsed = parseLocalizationFinish(finish.arguments, root);
          return end(parsed.ok ? 'answer' : 'invalid_answer', parsed);
        }
      }
      if (budgetSpent) return end('budget');
      if (calls.length === 0) return end('no_tool_call');
      if (turn >= limits.maxTurns) return end('turn_limit');

      const executed = calls.slice(0, limits.maxToolCallsPerTurn);
      const dropped = calls.slice(limits.maxToolCallsPerTurn);
      const outcomes = await Promise.all(executed.map(runCall));
      const observations: ChatMessage[] = outcomes.map((o) => o.message);
      dropped.forEach((call, k) => {
        const position = limits.maxToolCallsPerTurn + k + 1;
        observations.push(
          toolObservationMessage({
            toolCallId: call.id,
            ...(call.name === '' ? {} : { name: call.name }),
            content: droppedCallNotice(position, calls.length, limits.maxToolCallsPerTurn),
          }),
        );
      });
      if (turn === limits.maxTurns - 1) {
        observations.push({ role: 'user', content: lastTurnReminder(answerFormat, turn, limits.maxTurns) });
      }
      toolCalls += executed.length;
      toolCallsDropped += dropped.length;
      toolErrors += outcomes.filter((o) => o.failed).length;
      toolCallsPerTurn.push(executed.length);
      trajectory.push(...observations);
      return { observations, done: false };
    } finally {
      stepping = false;
    }
  }

  function result(): EpisodeResult {
    if (endReason === undefined)
      throw new Error(`result(): the episode of ${instance.instanceId} is not done (turn ${turns} of ${limits.maxTurns})`);
    return {
      instanceId: instance.instanceId,
      answerFormat,
      answer,
      answerValid: answer !== null,
      ...(answerError === undefined ? {} : { answerError }),
      turns,
      toolCalls,
      toolCallsPerTurn: [...toolCallsPerTurn],
      toolCallsDropped,
      toolErrors,
      finishCalls,
      promptTokens,
      completionTokens,
      endReason,
      trajectory: [...trajectory],
    };
  }

  return {
    instance,
    answerFormat,
    limits,
    initialMessages,
    tools,
    get messages() {
      return [...trajectory];
    },
    get turn() {
      return turns;
    },
    get done() {
      return endReason !== undefined;
    },
    step,
    result,
  };
}
