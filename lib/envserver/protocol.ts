import { z } from 'zod';
import type { ChatMessage } from '../../schemas/agent';
import type { AgentToolDefinition } from '../agent';
import type { EpisodeScore } from './score-episode';

/**
 * The environment server's side of trainer/ENV_PROTOCOL.md: request bodies (validated here, so a bad request
 * is a 4xx naming the field) and response bodies. Field names are camelCase as the protocol gives them.
 */

export const OpenRequestSchema = z.object({
  instanceIds: z.array(z.string().min(1, 'must be a non-empty instance id')),
  groupSize: z.number().int().min(1).max(4096),
  /** Fixed per (run seed, step); this environment has no randomness, so it is recorded only. */
  seed: z.number().int(),
});
export type OpenRequest = z.infer<typeof OpenRequestSchema>;

export const StepRequestSchema = z.object({
  steps: z.array(
    z.object({
      episodeId: z.string().min(1),
      /** The policy's raw completion for the turn (special tokens kept, no closing <|im_end|>). */
      assistantText: z.string(),
      /** The rollout's generation budget or context ran out during this turn. */
      truncated: z.boolean().default(false),
    }),
  ),
});
export type StepRequest = z.infer<typeof StepRequestSchema>;

export const CloseRequestSchema = z.object({ episodeIds: z.array(z.string().min(1)) });
export type CloseRequest = z.infer<typeof CloseRequestSchema>;

export interface OpenedEpisode {
  episodeId: string;
  instanceId: string;
  messages: ChatMessage[];
  tools: AgentToolDefinition[];
}
export interface OpenResponse {
  episodes: OpenedEpisode[];
}

export interface StepResultBody {
  episodeId: string;
  done: boolean;
  observations: ChatMessage[];
}
export interface StepResponse {
  results: StepResultBody[];
}

export interface CloseResultBody extends EpisodeScore {
  episodeId: string;
}
export interface CloseResponse {
  results: CloseResultBody[];
}

/** A request the server refuses: the HTTP status and a message naming what is wrong. */
export class EnvRequestError extends Error {
  override name = 'EnvRequestError';
  constructor(
    readonly status: 400 | 404 | 409 | 413 | 405,
    message: string,
  ) {
    super(message);
  }
}

/** Parses a request body, or throws a 400 naming the first bad fields (`steps[3].assistantText: …`). */
export function parseRequest<T>(schema: z.ZodType<T>, body: unknown, endpoint: string): T {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.slice(0, 3).map((issue) => {
    const where = issue.path.reduce<string>(
      (acc, key) => (typeof key === 'number' ? `${acc}[${key}]` : acc === '' ? String(key) : `${acc}.${String(key)}`),
      '',
    );
    return `${where || '(body)'}: ${issue.message}`;
  });
  throw new EnvRequestError(400, `${endpoint}: ${problems.join('; ')}`);
}
