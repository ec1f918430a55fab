import type { WeightSummary } from '../../schemas/catm';
import type { JudgeVerdict } from '../../schemas/judge';
import type { MinedCandidate } from '../../schemas/mining';
import type { CatmLabel, SamplesSummary } from '../../schemas/samples';
import type { RetainedLabelIndex } from './samples';
import { labelWeightModel, weighCandidate, type LabelWeightModel } from './weights';

/**
 * CATM stage 3's two streaming passes (CodeGrep §3.4, Eq. 1–2) over the candidates the judge kept, and the
 * stage's summary.
 */

/** The judged-and-kept candidates, streamed afresh on each call (see keptCandidates). */
export type KeptCandidates = () => AsyncGenerator<{ candidate: MinedCandidate; verdict: JudgeVerdict }>;

/** Pass 1: β = median l(f) and µraw = mean w̃ over the kept candidates; null when none was kept. */
export function fitWeightModel(kept: KeptCandidates): Promise<LabelWeightModel | null> {
  return labelWeightModel(
    (async function* () {
      for await (const { candidate } of kept()) yield candidate.postReasoningTokens;
    })(),
  );
}

/**
 * Pass 2: the weights, as labels (every kept file, with `retained`). The retained ones go into `index` as they
 * stream by, in the file's order (they are few): the same labels, and the same ties, as reading the written
 * labels back would give, without a third pass.
 */
export async function* weighedLabels(
  kept: KeptCandidates,
  model: LabelWeightModel | null,
  index: RetainedLabelIndex,
): AsyncGenerator<CatmLabel> {
  if (model === null) return;
  for await (const { candidate, verdict } of kept()) {
    const label = weighCandidate(candidate, verdict, model);
    index.add(label);
    yield label;
  }
}

/** The stage's summary: the model, how many labels it retained, and the samples pass's counts. */
export function weightSummary(model: LabelWeightModel | null, retained: number, samples: SamplesSummary): WeightSummary {
  const weighted = model?.candidates ?? 0;
  return {
    beta: model?.beta ?? null,
    muRaw: model?.muRaw ?? null,
    weighted,
    retained,
    retentionPct: weighted > 0 ? (100 * retained) / weighted : null,
    instancesRead: samples.instancesRead,
    instancesSkipped: samples.instancesSkipped,
    samplesWritten: samples.samplesWritten,
    samplesWithCatm: samples.samplesWithCatm,
  };
}
