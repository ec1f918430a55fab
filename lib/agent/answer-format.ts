import type { AgentAnswer, EndReason } from '../../schemas/agent';
import type { PendingCall } from './assistant-turn';
import type { ParsedAnswer } from './answer-codegrep';

/**
 * What each answer format (answer-codegrep.ts: CodeGrep §3.2's `<answer>` block; answer-codescout.ts:
 * CodeScout §3.2's `localization_finish` call) reads from a reply: whether the reply answers, and so ends the
 * episode, and how.
 */

/** A reply as the answer formats see it. */
export interface AnswerReply {
  /** The visible text (reasoning and tool-call blocks removed). */
  content: string;
  calls: readonly PendingCall[];
  /** Generation stopped at its token limit (`finish_reason: 'length'`). */
  truncated: boolean;
}

export interface ReplyAnswer {
  /** The reply's calls of the answer tool (CodeScout's `localization_finish`; always 0 for CodeGrep). */
  finishCalls: number;
  /** Set when the reply ends the episode: `answer`, `invalid_answer` (with the parse error) or `budget`. */
  end?: { reason: EndReason; parsed?: ParsedAnswer<AgentAnswer> };
}

export type ReplyAnswerReader = (reply: AnswerReply, worktreeRoot: string) => ReplyAnswer;
