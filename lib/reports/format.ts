import type { Estimate } from '../../schemas/evaluation';

/** Number formats shared by the Markdown and HTML reports, in the papers' styles. "–" stands for "not applicable". */

export const NOT_APPLICABLE = '–';

/** CodeGrep Table 2 style: three decimals. */
export function decimal3(value: number | null): string {
  return value === null ? NOT_APPLICABLE : value.toFixed(3);
}

/** CodeGrep Table 2's "Fβ ≥ 0.8" column: a percentage with one decimal. */
export function percent1(value: number | null): string {
  return value === null ? NOT_APPLICABLE : `${(value * 100).toFixed(1)}%`;
}

/** CodeScout Table 3 style: percentage points with two decimals, no sign. */
export function points2(value: number | null): string {
  return value === null ? NOT_APPLICABLE : (value * 100).toFixed(2);
}

/** Mean turns: one decimal (CodeGrep Table 2). */
export function decimal1(value: number | null): string {
  return value === null ? NOT_APPLICABLE : value.toFixed(1);
}

/** A bootstrap interval in the format of its estimate. */
export function interval(estimate: Estimate | null, format: (value: number) => string): string {
  if (!estimate || !estimate.ci) return NOT_APPLICABLE;
  return `[${format(estimate.ci.low)}, ${format(estimate.ci.high)}]`;
}

/** Text safe inside a Markdown table cell. */
export function markdownCell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

/** Text safe inside HTML element content and attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}
