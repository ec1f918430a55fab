import { AgentLimitsSchema, type AgentLimits, type ResolvedAgentLimits } from '../../schemas/agent';

/**
 * The episode's bounds from the papers. CodeGrep §3.2: "At each turn it emits up to 8 tool calls executed
 * concurrently ... exploration terminates on a final answer or after 4 turns (3 exploration + 1 answer)";
 * App. A.1 and Table 5 repeat them (8 parallel tools per turn, 4 turns × 8 = 32 tool executions per rollout).
 * CodeScout §4.1 also allows 4 turns for its 1.7B/14B models.
 */
export const PAPER_AGENT_LIMITS = {
  maxTurns: 4,
  maxToolCallsPerTurn: 8,
} as const satisfies ResolvedAgentLimits;

/** The limits with the papers' defaults for whatever `limits` leaves out; bad values fail naming the field. */
export function resolveAgentLimits(limits: AgentLimits | undefined): ResolvedAgentLimits {
  const parsed = AgentLimitsSchema.safeParse(limits ?? {});
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || 'limits'}: ${issue.message}`).join('; ');
    throw new RangeError(`agent limits are invalid: ${problems}`);
  }
  const { maxTurns, maxToolCallsPerTurn, maxCompletionTokens } = parsed.data;
  return {
    maxTurns: maxTurns ?? PAPER_AGENT_LIMITS.maxTurns,
    maxToolCallsPerTurn: maxToolCallsPerTurn ?? PAPER_AGENT_LIMITS.maxToolCallsPerTurn,
    ...(maxCompletionTokens === undefined ? {} : { maxCompletionTokens }),
  };
}
