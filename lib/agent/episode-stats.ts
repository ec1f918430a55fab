import type { EpisodeResult } from '../../schemas/agent';

/** The counts an episode reports in its result (schemas/agent.ts EpisodeResult). */
export type EpisodeCounts = Pick<
  EpisodeResult,
  'turns' | 'toolCalls' | 'toolCallsPerTurn' | 'toolCallsDropped' | 'toolErrors' | 'finishCalls' | 'promptTokens' | 'completionTokens'
>;

function checkedTokens(value: number, what: string): number {
  if (!Number.isInteger(value) || value < 0) throw new RangeError(`step(): usage.${what} must be a non-negative integer, got ${value}`);
  return value;
}

/**
 * Accumulates an episode's counts turn by turn: turns, tool calls run, dropped and failed, answer calls, and
 * the token usage the replies report (whose completion tokens the budget is checked against).
 */
export class EpisodeStats {
  turns = 0;
  toolCalls = 0;
  toolCallsDropped = 0;
  toolErrors = 0;
  finishCalls = 0;
  promptTokens = 0;
  completionTokens = 0;
  private readonly perTurn: number[] = [];

  /** Counts a new turn and its reply's usage; returns the turn's number (1-based). */
  startTurn(usage?: { promptTokens: number; completionTokens: number }): number {
    this.turns += 1;
    if (usage) {
      this.promptTokens += checkedTokens(usage.promptTokens, 'promptTokens');
      this.completionTokens += checkedTokens(usage.completionTokens, 'completionTokens');
    }
    return this.turns;
  }

  addFinishCalls(count: number): void {
    this.finishCalls += count;
  }

  /** A turn whose tool calls ran: `executed` run (`failed` of them with an error), `dropped` over the per-turn cap. */
  recordToolTurn(executed: number, dropped: number, failed: number): void {
    this.toolCalls += executed;
    this.toolCallsDropped += dropped;
    this.toolErrors += failed;
    this.perTurn.push(executed);
  }

  /** The last turn: it ended the episode, and none of its calls ran. */
  recordFinalTurn(): void {
    this.perTurn.push(0);
  }

  counts(): EpisodeCounts {
    return {
      turns: this.turns,
      toolCalls: this.toolCalls,
      toolCallsPerTurn: [...this.perTurn],
      toolCallsDropped: this.toolCallsDropped,
      toolErrors: this.toolErrors,
      finishCalls: this.finishCalls,
      promptTokens: this.promptTokens,
      completionTokens: this.completionTokens,
    };
  }
}
