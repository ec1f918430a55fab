import { TrainerStepLineSchema, type TrainerStepLine } from '../../schemas/training/trainer-protocol';
import type { LatestStepMetrics, TrainingMetricsRow } from '../../schemas/training/metrics';

/**
 * A step line the trainer wrote that breaks its contract (trainer/README.md "Output"): a code mismatch no
 * retry can fix, so the segment activity fails it as non-retryable `TrainerProtocolError`.
 */
export class TrainerProtocolError extends Error {
  override readonly name = 'TrainerProtocolError';
}

/** Parses one stdout line; a `step` line the schema refuses is a broken trainer contract (non-retryable). */
export function stepRowFromLine(
  text: string,
  where: { segment: number; attempt: number; line: number; file: string },
): TrainingMetricsRow | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null; // not one of the trainer's JSON lines (a library writing to stdout)
  }
  if (value === null || typeof value !== 'object' || (value as { event?: unknown }).event !== 'step') return null;
  const parsed = TrainerStepLineSchema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TrainerProtocolError(
      `${where.file}:${where.line}: the trainer's step line does not match trainer/README.md "Output": ${issue.path.join('.') || '(line)'}: ${issue.message}`,
    );
  }
  return stepLineToMetricsRow(parsed.data, { segment: where.segment, attempt: where.attempt, line: where.line });
}

/** The trainer's snake_case step line as a metrics row. */
export function stepLineToMetricsRow(line: TrainerStepLine, where: { segment: number; attempt: number; line: number }): TrainingMetricsRow {
  return {
    step: line.step,
    epoch: line.epoch,
    rewardMean: line.reward_mean,
    rewardStd: line.reward_std,
    rewardComponents: Object.entries(line.reward_components)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([name, value]) => ({ name, value })),
    kl: line.kl ?? Number.NaN,
    loss: line.loss,
    clipRatio: line.clip_ratio,
    gradNorm: line.grad_norm,
    lr: line.lr,
    turnsMean: line.turns_mean,
    toolCallsPerTurnMean: line.tool_calls_per_turn_mean,
    advantageScaleMean: line.advantage_scale_mean,
    answeredRatio: line.answered_ratio,
    hitTurnLimitRatio: line.hit_turn_limit_ratio,
    maskedRatio: line.masked_ratio,
    completionLenMean: line.completion_len_mean,
    truncatedRatio: line.truncated_ratio,
    stepTimeS: line.step_time_s,
    rolloutTimeS: line.rollout_time_s,
    updateTimeS: line.update_time_s,
    rolloutTokens: line.rollout_tokens,
    trainTokens: line.train_tokens,
    rolloutTokensPerS: line.rollout_tokens_per_s,
    trainTokensPerS: line.train_tokens_per_s,
    peakGpuMemGb: line.peak_gpu_mem_gb ?? null,
    policyVersion: line.policy_version ?? null,
    staleness: line.staleness ?? null,
    checkpoint: line.checkpoint,
    ...where,
  };
}

export function latestStepMetrics(row: TrainingMetricsRow): LatestStepMetrics {
  return {
    step: row.step,
    rewardMean: row.rewardMean,
    kl: Number.isFinite(row.kl) ? row.kl : null,
    turnsMean: row.turnsMean,
    completionLenMean: row.completionLenMean,
    toolCallsPerTurnMean: row.toolCallsPerTurnMean,
    stepTimeS: row.stepTimeS,
  };
}
