import {
  MESSAGE_SKIP_REASONS,
  ROW_SKIP_REASONS,
  VIEW_SKIP_REASONS,
  type MessageSkipReason,
  type MiningSummary,
  type RowSkipReason,
  type ViewSkipReason,
} from '../../schemas/mining';

const MAX_EXAMPLES = 50;

function zeroCounts<T extends string>(reasons: readonly T[]): Record<T, number> {
  return Object.fromEntries(reasons.map((r) => [r, 0])) as Record<T, number>;
}

/** Running counts of a mining pass; every skip is counted under exactly one reason (see MiningSummarySchema). */
export class MiningTally {
  rowsRead = 0;
  trajectoriesMined = 0;
  viewCalls = 0;
  viewsMined = 0;
  candidates = 0;
  candidatesBelowTokenFilter = 0;
  candidatesAfterTokenFilter = 0;
  private readonly rowsSkipped = zeroCounts(ROW_SKIP_REASONS);
  private readonly messagesSkipped = zeroCounts(MESSAGE_SKIP_REASONS);
  private readonly viewsSkipped = zeroCounts(VIEW_SKIP_REASONS);
  private readonly examples: MiningSummary['examples'] = [];

  constructor(readonly minReasoningTokens: number) {}

  skipRow(reason: RowSkipReason, ordinal: number, trajectoryId: string | null, detail: string): void {
    this.rowsSkipped[reason]++;
    this.example(ordinal, trajectoryId, reason, detail);
  }

  skipMessages(reason: MessageSkipReason, count: number, ordinal: number, trajectoryId: string, detail: string): void {
    if (count === 0) return;
    this.messagesSkipped[reason] += count;
    this.example(ordinal, trajectoryId, reason, detail);
  }

  skipView(reason: ViewSkipReason, ordinal: number, trajectoryId: string, detail: string): void {
    this.viewsSkipped[reason]++;
    this.example(ordinal, trajectoryId, reason, detail);
  }

  summary(): MiningSummary {
    return {
      rowsRead: this.rowsRead,
      trajectoriesMined: this.trajectoriesMined,
      rowsSkipped: { ...this.rowsSkipped },
      messagesSkipped: { ...this.messagesSkipped },
      viewCalls: this.viewCalls,
      viewsSkipped: { ...this.viewsSkipped },
      viewsMined: this.viewsMined,
      candidates: this.candidates,
      candidatesBelowTokenFilter: this.candidatesBelowTokenFilter,
      candidatesAfterTokenFilter: this.candidatesAfterTokenFilter,
      minReasoningTokens: this.minReasoningTokens,
      examples: this.examples.map((e) => ({ ...e })),
    };
  }

  private example(ordinal: number, trajectoryId: string | null, reason: string, detail: string): void {
    if (this.examples.length < MAX_EXAMPLES) this.examples.push({ ordinal, trajectoryId, reason, detail });
  }
}
