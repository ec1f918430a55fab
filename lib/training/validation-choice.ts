import type { ValidationMetric } from '../../schemas/training/config';
import type { ValidationRow } from '../../schemas/training/validation';

/**
 * Choosing among validated checkpoints: pure functions, so the training workflow (patience) and the policy
 * server (`checkpoint: best`) choose the same way.
 */

/** The step with the highest validation metric (the earliest of equals: the cheaper checkpoint), or null. */
export function bestValidatedStep(rows: readonly Pick<ValidationRow, 'step' | 'value'>[]): number | null {
  let best: { step: number; value: number } | null = null;
  for (const row of rows) {
    if (row.value === null) continue;
    if (best === null || row.value > best.value || (row.value === best.value && row.step < best.step))
      best = { step: row.step, value: row.value };
  }
  return best?.step ?? null;
}

/** The metric of an evaluation summary's retriever row (null when the level was not predicted). */
export function validationMetricValue(
  retriever: {
    table2: { fBetaMean: { value: number | null } };
    table3: {
      file: { f1: { value: number | null } };
      module: { f1: { value: number | null } } | null;
      function: { f1: { value: number | null } } | null;
    };
  },
  metric: ValidationMetric,
): number | null {
  switch (metric) {
    case 'fBetaMean':
      return retriever.table2.fBetaMean.value;
    case 'fileF1':
      return retriever.table3.file.f1.value;
    case 'moduleF1':
      return retriever.table3.module?.f1.value ?? null;
    case 'functionF1':
      return retriever.table3.function?.f1.value ?? null;
  }
}

/** Whether the last `patience` validations brought no new best: training stops early (CodeGrep §3.6 early-stops). */
export function patienceExhausted(rows: readonly Pick<ValidationRow, 'step' | 'value'>[], patience: number | undefined): boolean {
  if (patience === undefined || rows.length <= patience) return false;
  const best = bestValidatedStep(rows);
  const sorted = [...rows].sort((a, b) => a.step - b.step);
  const since = sorted.filter((r) => best === null || r.step > best).length;
  return since >= patience;
}
