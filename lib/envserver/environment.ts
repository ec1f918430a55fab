import { randomBytes } from 'node:crypto';
import type { AgentLimits, ResolvedAgentLimits } from '../../schemas/agent';
import type { TrainingRecipe } from '../../schemas/training/config';
import { createEpisode, resolveAgentLimits, type Episode, type ToolRunner } from '../agent';
import type { SandboxOptions } from '../sandbox';
import type { EnvSample } from './env-samples';
import {
  CloseRequestSchema,
  EnvRequestError,
  OpenRequestSchema,
  StepRequestSchema,
  parseRequest,
  type CloseResponse,
  type OpenResponse,
  type StepResponse,
} from './protocol';
import { recipeDefinition, type RecipeDefinition } from './recipes';
import { scoreEpisode, type EpisodeActivity } from './score-episode';

export interface TrainingEnvironmentOptions {
  /** Trainable samples by instance id (lib/envserver/env-samples.ts). */
  samples: ReadonlyMap<string, EnvSample>;
  recipe: TrainingRecipe;
  /** Turn and per-turn tool-call limits; lib/agent's paper defaults for what is left out. */
  limits?: AgentLimits;
  codescoutTurnBonus?: boolean;
  /** Passed to every tool call (engine, timeouts, cancellation). */
  sandbox?: SandboxOptions;
  /** Runs one tool call; lib/sandbox's runTool unless a caller wraps it. */
  toolRunner?: ToolRunner;
  /** Prefix of episode ids; random by default, so ids of an earlier server are unknown to this one. */
  idPrefix?: string;
}

export interface EnvironmentStats {
  opened: number;
  closed: number;
  /** Episodes opened and not yet closed. */
  open: number;
  stepRequests: number;
  turns: number;
}

export interface TrainingEnvironment {
  /** POST /episodes/open: `groupSize` episodes per instance id, in request order. */
  open(body: unknown): Promise<OpenResponse>;
  /** POST /episodes/step: one turn of each listed episode, their tools run concurrently. */
  step(body: unknown): Promise<StepResponse>;
  /** POST /episodes/close: scores and forgets the episodes. */
  close(body: unknown): CloseResponse;
  stats(): EnvironmentStats;
}

interface Entry {
  episode: Episode;
  sample: EnvSample;
  stepping: boolean;
}

function assertUnique(ids: readonly string[], field: string, endpoint: string): void {
  const seen = new Set<string>();
  ids.forEach((id, i) => {
    if (seen.has(id)) throw new EnvRequestError(400, `${endpoint}: ${field}[${i}]: episode ${JSON.stringify(id)} is listed twice`);
    seen.add(id);
  });
}

/** What the endpoints of one environment share: its resolved options, its open episodes and its counters. */
interface EnvironmentState {
  options: TrainingEnvironmentOptions;
  recipe: RecipeDefinition;
  limits: ResolvedAgentLimits;
  prefix: string;
  episodes: Map<string, Entry>;
  counters: Omit<EnvironmentStats, 'open'>;
}

/**
 * The RL environment behind trainer/ENV_PROTOCOL.md, without its transport: one lib/agent episode per
 * rollout (batch × group of them), the policy's raw Qwen3 text parsed there (tool calls, `<answer>` or
 * `localization_finish`), lib/sandbox tools run in the sample's worktree (CodeGrep App. A.1: up to 8 calls
 * per turn, concurrently, under the sandbox's global limit of 64 subprocesses), and the recipe's reward
 * from lib/rewards on close. Bad requests throw EnvRequestError (4xx) naming the field or episode.
 */
export function createTrainingEnvironment(options: TrainingEnvironmentOptions): TrainingEnvironment {
  const state: EnvironmentState = {
    options,
    recipe: recipeDefinition(options.recipe),
    limits: resolveAgentLimits(options.limits),
    prefix: options.idPrefix ?? `e${randomBytes(3).toString('hex')}`,
    episodes: new Map<string, Entry>(),
    counters: { opened: 0, closed: 0, stepRequests: 0, turns: 0 },
  };
  return {
    open: (body) => openEpisodes(state, body),
    step: (body) => stepEpisodes(state, body),
    close: (body) => closeEpisodes(state, body),
    stats: () => ({ ...state.counters, open: state.episodes.size }),
  };
}

function openEntry(state: EnvironmentState, id: string, field: string, endpoint: string): Entry {
  const found = state.episodes.get(id);
  if (!found)
    throw new EnvRequestError(
      404,
      `${endpoint}: ${field}: unknown episode ${JSON.stringify(id)} (never opened, already closed, or opened by another server)`,
    );
  return found;
}

async function openEpisodes(state: EnvironmentState, body: unknown): Promise<OpenResponse> {
  const { options } = state;
  const request = parseRequest(OpenRequestSchema, body, '/episodes/open');
  const samples = request.instanceIds.map((id, i) => {
    const sample = options.samples.get(id);
    if (!sample)
      throw new EnvRequestError(
        400,
        `/episodes/open: instanceIds[${i}]: unknown instance ${JSON.stringify(id)} (not a trainable sample of this run)`,
      );
    return sample;
  });
  // Every episode is created before any is registered, so a failure (a worktree gone) leaves none behind.
  const created = samples.flatMap((sample) =>
    Array.from({ length: request.groupSize }, () => ({
      sample,
      episode: createEpisode({
        instance: sample.instance,
        worktreeRoot: sample.worktree,
        answerFormat: state.recipe.answerFormat,
        limits: state.limits,
        ...(options.sandbox ? { sandbox: options.sandbox } : {}),
        ...(options.toolRunner ? { toolRunner: options.toolRunner } : {}),
      }),
    })),
  );
  const response: OpenResponse = { episodes: [] };
  for (const { sample, episode } of created) {
    const episodeId = `${state.prefix}-${state.counters.opened++}`;
    state.episodes.set(episodeId, { episode, sample, stepping: false });
    response.episodes.push({
      episodeId,
      instanceId: sample.instance.instanceId,
      messages: [...episode.initialMessages],
      tools: [...episode.tools],
    });
  }
  return response;
}

async function stepEpisodes(state: EnvironmentState, body: unknown): Promise<StepResponse> {
  const request = parseRequest(StepRequestSchema, body, '/episodes/step');
  assertUnique(
    request.steps.map((s) => s.episodeId),
    'steps',
    '/episodes/step',
  );
  const work = request.steps.map((s, i) => {
    const found = openEntry(state, s.episodeId, `steps[${i}].episodeId`, '/episodes/step');
    if (found.episode.done) throw new EnvRequestError(409, `/episodes/step: steps[${i}]: episode ${s.episodeId} is already done; close it`);
    if (found.stepping) throw new EnvRequestError(409, `/episodes/step: steps[${i}]: episode ${s.episodeId} has a step in flight`);
    return { request: s, found };
  });
  state.counters.stepRequests++;
  for (const { found } of work) found.stepping = true;
  try {
    const results = await Promise.all(
      work.map(async ({ request: s, found }) => {
        // A truncated turn spent the rollout's budget: the episode records it and ends without running tools.
        const result = await found.episode.step({ text: s.assistantText, finishReason: s.truncated ? 'length' : 'stop' });
        state.counters.turns++;
        return { episodeId: s.episodeId, done: result.done, observations: result.done ? [] : result.observations };
      }),
    );
    return { results };
  } finally {
    for (const { found } of work) found.stepping = false;
  }
}

function closeEpisodes(state: EnvironmentState, body: unknown): CloseResponse {
  const { options, limits } = state;
  const request = parseRequest(CloseRequestSchema, body, '/episodes/close');
  assertUnique(request.episodeIds, 'episodeIds', '/episodes/close');
  const found = request.episodeIds.map((id, i) => {
    const e = openEntry(state, id, `episodeIds[${i}]`, '/episodes/close');
    if (e.stepping) throw new EnvRequestError(409, `/episodes/close: episodeIds[${i}]: episode ${id} has a step in flight`);
    return e;
  });
  const results = request.episodeIds.map((episodeId, i) => {
    const { episode, sample } = found[i]!;
    const score = scoreEpisode(activityOf(episode, limits), sample.targets, {
      recipe: options.recipe,
      maxTurns: limits.maxTurns,
      codescoutTurnBonus: options.codescoutTurnBonus ?? false,
    });
    return { episodeId, ...score };
  });
  for (const id of request.episodeIds) state.episodes.delete(id);
  state.counters.closed += request.episodeIds.length;
  return { results };
}

function activityOf(episode: Episode, limits: ResolvedAgentLimits): EpisodeActivity {
  if (episode.done) {
    const result = episode.result();
    return {
      turns: result.turns,
      toolCalls: result.toolCalls,
      answer: result.answer,
      answerValid: result.answerValid,
      finishCalls: result.finishCalls,
      endReason: result.endReason,
    };
  }
  // Closed before it ended (the trainer's own turn or context guard, or an aborted step): every turn so far
  // ran its calls, up to the per-turn limit, exactly as the episode counts them.
  let toolCalls = 0;
  for (const message of episode.messages) {
    if (message.role === 'assistant') toolCalls += Math.min(message.tool_calls?.length ?? 0, limits.maxToolCallsPerTurn);
  }
  return { turns: episode.turn, toolCalls, answer: null, answerValid: false, finishCalls: 0, endReason: null };
}
