import type { ChatMessage } from '../../../schemas/agent';
import type { DownstreamEndReason, DownstreamInstance, PatchDroppedFile } from '../../../schemas/downstream';

/**
 * The frozen downstream coding agent of the injection study (CodeGrep §4.1: OpenHands, temperature 0, at
 * most 100 rounds). Every implementation — the built-in agent on an OpenAI-compatible endpoint, OpenHands run
 * as an outside command — takes the same prompt and reports the same counters, so a configuration's numbers
 * do not depend on which one ran.
 */
export interface DownstreamRunContext {
  /** A fresh, writable checkout at the instance's base commit, owned by this run (see run-worktree.ts). */
  workdir: string;
  baseCommit: string;
  /** A private directory for the run's files (prompt, outside-agent output); not inside `workdir`. */
  scratch: string;
  signal?: AbortSignal;
}

export interface DownstreamAgentResult {
  /** The change as a unified diff against the base commit ('' when the agent changed nothing). */
  patch: string;
  /** Changed files left out of `patch` (over its size cap, or under a name git refuses); absent means none. */
  patchDropped?: PatchDroppedFile[];
  /** Model calls made. */
  rounds: number;
  /** Prompt tokens summed over the rounds. */
  inputTokens: number;
  /** Completion tokens summed over the rounds. */
  outputTokens: number;
  trajectory: ChatMessage[];
  endReason: DownstreamEndReason;
  /** What went wrong, for `llm_error`, `context_limit`, `agent_error` and `timeout`. */
  error?: string;
}

export interface DownstreamAgent {
  readonly name: string;
  /**
   * Solves `instance` from `prompt` (the issue text after injection) in `ctx.workdir`. Failures of the model
   * endpoint or the outside agent are reported through `endReason`/`error`, with whatever patch was made;
   * only cancellation (`ctx.signal`) and a broken checkout reject.
   */
  run(instance: DownstreamInstance, prompt: string, ctx: DownstreamRunContext): Promise<DownstreamAgentResult>;
}
