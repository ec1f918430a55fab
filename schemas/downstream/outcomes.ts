import { z } from 'zod';

// How an agent run ends and what a harness says about its patch (lib/downstream's agents and harnesses).

/**
 * Why a downstream agent run ended.
 * - `submitted`: the agent called its finish tool (`submit`; OpenHands' `finish`).
 * - `no_tool_call`: a reply without a tool call ended the run (the usual chat-agent stop).
 * - `length`: the last reply was cut by the completion-token limit and held no tool call.
 * - `round_limit`: the round budget (CodeGrep §4.1: 100) ran out.
 * - `context_limit`: the endpoint refused the request because the conversation outgrew the context.
 * - `llm_error`: the endpoint failed for good (auth, retries exhausted, a refused request).
 * - `timeout`: an outside agent ran past its time limit and was killed.
 * - `agent_error`: an outside agent failed (non-zero exit, no output, an error in its output).
 * - `stopped`: an outside agent ended without saying why.
 */
export const DownstreamEndReasonSchema = z.enum([
  'submitted',
  'no_tool_call',
  'length',
  'round_limit',
  'context_limit',
  'llm_error',
  'timeout',
  'agent_error',
  'stopped',
]);
export type DownstreamEndReason = z.infer<typeof DownstreamEndReasonSchema>;

/**
 * What a harness says about one patch. `patch_failed`: the patch does not apply at the base commit;
 * `timeout`: the tests ran past the limit and were killed; `error`: the evaluation itself could not be done
 * (missing interpreter, a broken instance, the harness crashed) — never the model's fault.
 */
export const HarnessOutcomeSchema = z.enum(['resolved', 'unresolved', 'patch_failed', 'timeout', 'error']);
export type HarnessOutcome = z.infer<typeof HarnessOutcomeSchema>;

export const TestStatusSchema = z.object({ test: z.string(), passed: z.boolean() });
export type TestStatus = z.infer<typeof TestStatusSchema>;

export const HarnessResultSchema = z.object({
  resolved: z.boolean(),
  outcome: HarnessOutcomeSchema,
  /** What happened, for a human: commands, their output tails, the reason for the outcome. */
  log: z.string(),
  failToPass: z.array(TestStatusSchema),
  passToPass: z.array(TestStatusSchema),
});
export type HarnessResult = z.infer<typeof HarnessResultSchema>;
