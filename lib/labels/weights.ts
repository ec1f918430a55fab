import { keepsFile, type JudgeVerdict } from '../../schemas/judge';
import type { MinedCandidate } from '../../schemas/mining';
import type { CatmLabel } from '../../schemas/samples';
import { MIN_LABEL_WEIGHT } from '../trajectories/catm-parameters';

/**
 * CATM stage 3, intensity-aware weighting (CodeGrep §3.4, Eq. 1–2, App. A.2; after LRAT):
 *
 *   w̃(f) = 1 − exp(−ln2 · l(f)/β)        (Eq. 1)   β = median l(f)
 *   w(f) = w̃(f) / µraw                    (Eq. 2)   µraw = mean w̃
 *   keep f iff w(f) ≥ 0.15                (§3.4, App. A.2, Table 5)
 *
 * l(f) is the post-reasoning length in Qwen3 tokens. A file at the median length gets w̃ = ½.
 *
 * Which candidates β and µraw are taken over. App. A.2 calls β "the median post-reasoning length across all
 * mined candidates" and µraw "the mean of the unnormalized weights over the whole dataset": global constants,
 * not per issue. The stages run in order (§3.4: mining → judge filtering → weighting; Table 5 lists
 * "reasoning_tokens ≥ 30" as a judge threshold, applied before judging), and stage 3 weighs the files that
 * reach it. So here both constants are computed over the population that is weighted and thresholded: the
 * candidates that passed the 30-token filter AND were kept by the judge (every verdict but NOT_RELEVANT).
 * Taking µraw over that same population is what makes §3.4's "E[w] ≈ 1, so a single threshold generalizes"
 * hold for the files the 0.15 threshold is applied to. Callers feed exactly those lengths.
 *
 * Degenerate cases, defined so that no NaN can reach a label:
 *   - no candidates: no model (β and µraw undefined), nothing to weigh;
 *   - β = 0 (at least half the lengths are 0): Eq. 1's limit as β → 0⁺, i.e. w̃ = 0 for l = 0, 1 for l > 0;
 *   - µraw = 0 (every length 0): w = 0 for all, so every file is dropped.
 * Median of an even count = mean of the two middle values.
 */

export type LabelWeightModel = {
  /** Median l(f). */
  beta: number;
  /** Mean w̃ over the same candidates. */
  muRaw: number;
  /** How many candidates the constants were computed over. */
  candidates: number;
};

/** Eq. 1. */
export function unnormalizedWeight(tokens: number, beta: number): number {
  assertLength(tokens);
  if (beta === 0) return tokens === 0 ? 0 : 1;
  return 1 - Math.exp((-Math.LN2 * tokens) / beta);
}

/** Eq. 2. */
export function labelWeight(tokens: number, model: LabelWeightModel): number {
  if (model.muRaw === 0) return 0;
  return unnormalizedWeight(tokens, model.beta) / model.muRaw;
}

/** The retention rule: inclusive, so a weight of exactly 0.15 is kept. */
export function isRetainedWeight(weight: number): boolean {
  return weight >= MIN_LABEL_WEIGHT;
}

/**
 * Pass 1 of the paper's two passes, streaming: collects l(f) as a histogram (lengths are integers, so memory is
 * the number of DISTINCT lengths, not of candidates), then gives β and µraw exactly: µraw is the mean of w̃ over
 * the same multiset, summed per distinct length. Pass 2 is `labelWeight` applied to each candidate.
 */
export class ReasoningLengthStats {
  private readonly counts = new Map<number, number>();
  private total = 0;

  add(tokens: number): void {
    assertLength(tokens);
    this.counts.set(tokens, (this.counts.get(tokens) ?? 0) + 1);
    this.total++;
  }

  get candidates(): number {
    return this.total;
  }

  /** null when no length was added. */
  median(): number | null {
    if (this.total === 0) return null;
    const sorted = [...this.counts].sort((a, b) => a[0] - b[0]);
    // 0-based ranks of the middle value(s).
    const lowRank = Math.floor((this.total - 1) / 2);
    const highRank = Math.floor(this.total / 2);
    let seen = 0;
    let low: number | undefined;
    for (const [length, count] of sorted) {
      seen += count;
      if (low === undefined && seen > lowRank) low = length;
      if (seen > highRank) return (low! + length) / 2;
    }
    throw new Error('unreachable: ranks are below the total');
  }

  /** β and µraw, or null when there is nothing to weigh. */
  model(): LabelWeightModel | null {
    const beta = this.median();
    if (beta === null) return null;
    let sum = 0;
    for (const [length, count] of this.counts) sum += count * unnormalizedWeight(length, beta);
    return { beta, muRaw: sum / this.total, candidates: this.total };
  }
}

/** Pass 1 over any stream of lengths. */
export async function labelWeightModel(lengths: Iterable<number> | AsyncIterable<number>): Promise<LabelWeightModel | null> {
  const stats = new ReasoningLengthStats();
  for await (const tokens of lengths) stats.add(tokens);
  return stats.model();
}

/**
 * Pass 2 for one candidate: its label row. Only candidates the judge kept have labels (and only their lengths
 * went into the model), so an explicit NOT_RELEVANT is refused rather than silently weighted.
 */
export function weighCandidate(
  candidate: Pick<MinedCandidate, 'instanceId' | 'trajectoryId' | 'repo' | 'path' | 'postReasoningTokens'>,
  verdict: JudgeVerdict,
  model: LabelWeightModel,
): CatmLabel {
  if (!keepsFile(verdict)) {
    throw new RangeError(`weighCandidate: ${candidate.trajectoryId} ${candidate.path} was judged ${verdict}; only kept files are weighted`);
  }
  const weight = labelWeight(candidate.postReasoningTokens, model);
  return {
    instanceId: candidate.instanceId,
    trajectoryId: candidate.trajectoryId,
    repo: candidate.repo,
    path: candidate.path,
    postReasoningTokens: candidate.postReasoningTokens,
    verdict,
    unnormalizedWeight: unnormalizedWeight(candidate.postReasoningTokens, model.beta),
    weight,
    retained: isRetainedWeight(weight),
  };
}

export type ComputedWeights = {
  beta: number | null;
  muRaw: number | null;
  /** w̃ per input, in input order. */
  unnormalized: number[];
  /** w per input, in input order. */
  weights: number[];
  /** w ≥ 0.15 per input. */
  retained: boolean[];
};

/** Both passes over an in-memory list (for tests and small inputs). */
export function computeWeights(lengths: readonly number[]): ComputedWeights {
  const stats = new ReasoningLengthStats();
  for (const tokens of lengths) stats.add(tokens);
  const model = stats.model();
  if (model === null) return { beta: null, muRaw: null, unnormalized: [], weights: [], retained: [] };
  const weights = lengths.map((l) => labelWeight(l, model));
  return {
    beta: model.beta,
    muRaw: model.muRaw,
    unnormalized: lengths.map((l) => unnormalizedWeight(l, model.beta)),
    weights,
    retained: weights.map(isRetainedWeight),
  };
}

function assertLength(tokens: number): void {
  if (!Number.isInteger(tokens) || tokens < 0) {
    throw new RangeError(`post-reasoning length must be a non-negative integer token count, got ${tokens}`);
  }
}
