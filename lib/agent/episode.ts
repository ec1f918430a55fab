import { statSync } from 'node:fs';
import path from 'node:path';
import {
  AgentInstanceSchema,
  AnswerFormatSchema,
  type AgentAnswer,
  type AgentInstance,
  type AgentLimits,
  type AnswerFormat,
  type ChatMessage,
  type EndReason,
  type EpisodeResult,
  type ResolvedAgentLimits,
} from '../../schemas/agent';
import { CODEGREP_TOOL_NAMES, TERMINAL_TOOL_NAMES, ToolNameSchema, toolDefinitions, type ToolName } from '../../schemas/tools';
import { runTool, type SandboxOptions } from '../sandbox';
import { readCodeGrepReply, type ParsedAnswer } from './answer-codegrep';
import { localizationFinishToolDefinition, readCodeScoutReply } from './answer-codescout';
import type { ReplyAnswerReader } from './answer-format';
import { readAssistantTurn, type AssistantTurn } from './assistant-turn';
import { EpisodeStats } from './episode-stats';
import { resolveAgentLimits } from './limits';
import { lastTurnReminder, systemPrompt, userPrompt } from './prompts';
import { runToolTurn, type ToolRunner, type ToolTurnContext } from './tool-turn';

export type { AssistantToolCall, AssistantTurn } from './assistant-turn';
export type { ToolRunner } from './tool-turn';

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

/** How each answer format reads a reply's answer (answer-format.ts). */
const ANSWER_READERS: Record<AnswerFormat, ReplyAnswerReader> = {
  codegrep: readCodeGrepReply,
  codescout: readCodeScoutReply,
};

function defaultTools(format: AnswerFormat): readonly ToolName[] {
  return format === 'codegrep' ? CODEGREP_TOOL_NAMES : TERMINAL_TOOL_NAMES;
}

/** The tool definitions an episode offers (its sandbox tools, and `localization_finish` for CodeScout). */
export function episodeToolDefinitions(format: AnswerFormat, toolNames: readonly ToolName[] = defaultTools(format)): AgentToolDefinition[] {
  return [...toolDefinitions(toolNames), ...(format === 'codescout' ? [localizationFinishToolDefinition()] : [])];
}

interface CheckedOptions {
  instance: AgentInstance;
  answerFormat: AnswerFormat;
  limits: ResolvedAgentLimits;
  root: string;
  toolNames: ToolName[];
}

/** Validates what createEpisode was given; each problem is a TypeError or Error naming the input. */
function checkOptions(options: CreateEpisodeOptions): CheckedOptions {
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
  return { instance, answerFormat, limits, root, toolNames };
}

/** The episode's fixed parts: its checked options, the tools it offers and how they run, the conversation's opening. */
function setUpEpisode(options: CreateEpisodeOptions) {
  const { instance, answerFormat, limits, root, toolNames } = checkOptions(options);
  const tools = episodeToolDefinitions(answerFormat, toolNames);
  const toolContext: ToolTurnContext = {
    root,
    sandbox: options.sandbox ?? {},
    runner: options.toolRunner ?? runTool,
    offered: new Set<string>(toolNames),
    availableList: tools.map((t) => t.function.name).join(', '),
    maxToolCallsPerTurn: limits.maxToolCallsPerTurn,
  };
  const initialMessages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(answerFormat, toolNames, limits) },
    { role: 'user', content: userPrompt(instance) },
  ];
  return { instance, answerFormat, limits, root, tools, toolContext, initialMessages };
}

/** An episode's record: the conversation, the counts and, once it has ended, why and with which answer. */
class EpisodeRecord {
  readonly trajectory: ChatMessage[];
  readonly stats = new EpisodeStats();
  endReason: EndReason | undefined;
  private answer: AgentAnswer | null = null;
  private answerError: string | undefined;

  constructor(initialMessages: readonly ChatMessage[]) {
    this.trajectory = [...initialMessages];
  }

  /** Ends the episode with the turn just taken, whose calls do not run. */
  end(reason: EndReason, parsed?: ParsedAnswer<AgentAnswer>): StepResult {
    this.endReason = reason;
    if (parsed?.ok) this.answer = parsed.answer;
    else if (parsed) this.answerError = parsed.error;
    this.stats.recordFinalTurn();
    return { observations: [], done: true, endReason: reason };
  }

  result(instanceId: string, answerFormat: AnswerFormat, endReason: EndReason): EpisodeResult {
    return {
      instanceId,
      answerFormat,
      answer: this.answer,
      answerValid: this.answer !== null,
      ...(this.answerError === undefined ? {} : { answerError: this.answerError }),
      ...this.stats.counts(),
      endReason,
      trajectory: [...this.trajectory],
    };
  }
}

export function createEpisode(options: CreateEpisodeOptions): Episode {
  const { instance, answerFormat, limits, root, tools, toolContext, initialMessages } = setUpEpisode(options);
  const readAnswer = ANSWER_READERS[answerFormat];

  const record = new EpisodeRecord(initialMessages);
  const { trajectory, stats } = record;
  const end = (reason: EndReason, parsed?: ParsedAnswer<AgentAnswer>) => record.end(reason, parsed);
  let stepping = false;

  async function takeTurn(reply: AssistantTurn): Promise<StepResult> {
    const turn = stats.startTurn(reply.usage);
    const { content, calls, assistant } = readAssistantTurn(reply, turn);
    trajectory.push(assistant);

    const truncated = reply.finishReason === 'length';
    const budgetSpent = truncated || (limits.maxCompletionTokens !== undefined && stats.completionTokens >= limits.maxCompletionTokens);
    const answered = readAnswer({ content, calls, truncated }, root);
    stats.addFinishCalls(answered.finishCalls);
    if (answered.end) return end(answered.end.reason, answered.end.parsed);
    if (budgetSpent) return end('budget');
    if (calls.length === 0) return end('no_tool_call');
    if (turn >= limits.maxTurns) return end('turn_limit');

    const ran = await runToolTurn(calls, toolContext);
    const observations = ran.observations;
    if (turn === limits.maxTurns - 1) {
      observations.push({ role: 'user', content: lastTurnReminder(answerFormat, turn, limits.maxTurns) });
    }
    stats.recordToolTurn(ran.executed, ran.dropped, ran.failed);
    trajectory.push(...observations);
    return { observations, done: false };
  }

  async function step(reply: AssistantTurn): Promise<StepResult> {
    if (record.endReason !== undefined)
      throw new Error(`step(): the episode of ${instance.instanceId} is already done (${record.endReason})`);
    if (stepping) throw new Error(`step(): the previous step of ${instance.instanceId} is still running`);
    if (reply === null || typeof reply !== 'object' || typeof reply.text !== 'string') {
      throw new TypeError('step(): reply must be an object with a string `text`');
    }
    stepping = true;
    try {
      return await takeTurn(reply);
    } finally {
      stepping = false;
    }
  }

  function result(): EpisodeResult {
    if (record.endReason === undefined)
      throw new Error(`result(): the episode of ${instance.instanceId} is not done (turn ${stats.turns} of ${limits.maxTurns})`);
    return record.result(instance.instanceId, answerFormat, record.endReason);
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
      return stats.turns;
    },
    get done() {
      return record.endReason !== undefined;
    },
    step,
    result,
  };
}
