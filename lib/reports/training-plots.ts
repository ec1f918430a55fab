import type { TrainingMetricsRow } from '../../schemas/training/metrics';

/**
 * Self-contained SVG line plots of the training metrics over steps, the panels of CodeGrep's Fig. 2 (reward,
 * KL to the reference, tool-use turns) and Fig. 4 / App. D (mean completion length, gradient norm,
 * completion-clipping ratio). No dependencies, no scripts, no external fonts: the files open in any browser
 * and can be inlined into an HTML report.
 */

export interface PlotPoint {
  x: number;
  y: number;
}

export interface LinePlotOptions {
  title: string;
  xLabel: string;
  yLabel: string;
  points: readonly PlotPoint[];
  width?: number;
  height?: number;
  /**
   * Weight of the exponential moving average drawn over the raw line (0 = none). Long runs are noisy
   * step to step; the papers' curves are smoothed.
   */
  smoothing?: number;
}

const MARGIN = { top: 34, right: 18, bottom: 44, left: 64 };
/** Raw points get markers up to this many; beyond, the line alone reads better. */
const MAX_MARKERS = 40;
/** Series shorter than this are drawn raw only. */
const MIN_POINTS_TO_SMOOTH = 20;

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Round, evenly spaced tick values covering [min, max] (1, 2, 2.5 or 5 × a power of ten apart). */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) throw new RangeError(`niceTicks: min and max must be finite, got ${min}, ${max}`);
  if (max < min) [min, max] = [max, min];
  if (max === min) {
    const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
    min -= pad;
    max += pad;
  }
  const raw = (max - min) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => s >= raw)!;
  const first = Math.floor(min / step + 1e-9);
  const last = Math.ceil(max / step - 1e-9);
  return Array.from({ length: last - first + 1 }, (_, i) => Number(((first + i) * step).toPrecision(12)));
}

/** A tick label: few digits, k/M for large values, exponent for tiny ones. */
export function formatTick(value: number): string {
  const abs = Math.abs(value);
  if (abs === 0) return '0';
  if (abs >= 1e6) return `${Number((value / 1e6).toPrecision(3))}M`;
  if (abs >= 1e4) return `${Number((value / 1e3).toPrecision(3))}k`;
  if (abs < 1e-3) return value.toExponential(1).replace('e-', 'e−');
  return String(Number(value.toPrecision(3)));
}

/** Exponential moving average with TensorBoard's debiasing, so the first values are not pulled to 0. */
export function smooth(values: readonly number[], weight: number): number[] {
  if (!(weight >= 0 && weight < 1)) throw new RangeError(`smoothing weight must be in [0, 1), got ${weight}`);
  let last = 0;
  return values.map((value, i) => {
    last = last * weight + (1 - weight) * value;
    return last / (1 - weight ** (i + 1));
  });
}

/** One line plot as a standalone SVG document. Points with a non-finite x or y are left out. */
export function linePlotSvg(options: LinePlotOptions): string {
  const width = options.width ?? 560;
  const height = options.height ?? 300;
  const points = options.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y)).sort((a, b) => a.x - b.x);
  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const title = escapeXml(options.title);
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${title}" font-family="Helvetica, Arial, sans-serif" font-size="11">`,
    `<title>${title}</title>`,
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold" fill="#222">${title}</text>`,
  ];
  if (points.length === 0) {
    parts.push(`<text x="${width / 2}" y="${height / 2}" text-anchor="middle" fill="#888">no data</text>`, '</svg>');
    return parts.join('\n');
  }
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const xTicks = niceTicks(Math.min(...xs), Math.max(...xs));
  const yTicks = niceTicks(Math.min(...ys), Math.max(...ys));
  const [x0, x1] = [xTicks[0]!, xTicks[xTicks.length - 1]!];
  const [y0, y1] = [yTicks[0]!, yTicks[yTicks.length - 1]!];
  const sx = (x: number) => MARGIN.left + (x1 === x0 ? plotW / 2 : ((x - x0) / (x1 - x0)) * plotW);
  const sy = (y: number) => MARGIN.top + plotH - (y1 === y0 ? plotH / 2 : ((y - y0) / (y1 - y0)) * plotH);
  const fmt = (v: number) => v.toFixed(2);

  for (const t of yTicks) {
    parts.push(`<line x1="${MARGIN.left}" y1="${fmt(sy(t))}" x2="${MARGIN.left + plotW}" y2="${fmt(sy(t))}" stroke="#e6e6e6"/>`);
    parts.push(`<text x="${MARGIN.left - 6}" y="${fmt(sy(t) + 4)}" text-anchor="end" fill="#444">${escapeXml(formatTick(t))}</text>`);
  }
  for (const t of xTicks) {
    parts.push(`<line x1="${fmt(sx(t))}" y1="${MARGIN.top + plotH}" x2="${fmt(sx(t))}" y2="${MARGIN.top + plotH + 4}" stroke="#444"/>`);
    parts.push(
      `<text x="${fmt(sx(t))}" y="${MARGIN.top + plotH + 16}" text-anchor="middle" fill="#444">${escapeXml(formatTick(t))}</text>`,
    );
  }
  parts.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#444"/>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${height - 8}" text-anchor="middle" fill="#222">${escapeXml(options.xLabel)}</text>`,
    `<text transform="translate(14 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle" fill="#222">${escapeXml(options.yLabel)}</text>`,
  );

  const smoothing = options.smoothing ?? 0;
  const smoothed = smoothing > 0 && points.length >= MIN_POINTS_TO_SMOOTH;
  const line = (ys: readonly number[]) => points.map((p, i) => `${fmt(sx(p.x))},${fmt(sy(ys[i]!))}`).join(' ');
  parts.push(
    `<polyline class="raw" fill="none" stroke="${smoothed ? '#9ec5e8' : '#1f77b4'}" stroke-width="${smoothed ? 1 : 1.8}" points="${line(ys)}"/>`,
  );
  if (smoothed) {
    parts.push(`<polyline class="smoothed" fill="none" stroke="#1f77b4" stroke-width="2" points="${line(smooth(ys, smoothing))}"/>`);
  }
  if (points.length <= MAX_MARKERS) {
    for (const p of points) parts.push(`<circle cx="${fmt(sx(p.x))}" cy="${fmt(sy(p.y))}" r="2.5" fill="#1f77b4"/>`);
  }
  parts.push('</svg>');
  return parts.join('\n');
}

type NumericMetric = {
  [K in keyof TrainingMetricsRow]: TrainingMetricsRow[K] extends number ? K : never;
}[keyof TrainingMetricsRow];

export interface TrainingPlotSpec {
  /** File name stem, e.g. `reward` → `reward.svg`. */
  name: string;
  title: string;
  yLabel: string;
  metric: NumericMetric;
  /** Where the papers show it. */
  figure: string;
}

export const TRAINING_PLOT_SPECS: readonly TrainingPlotSpec[] = [
  { name: 'reward', title: 'Reward', yLabel: 'mean reward', metric: 'rewardMean', figure: 'CodeGrep Fig. 2a' },
  { name: 'kl', title: 'KL to reference', yLabel: 'KL per token', metric: 'kl', figure: 'CodeGrep Fig. 2b' },
  { name: 'turns', title: 'Tool-use turns', yLabel: 'mean turns per rollout', metric: 'turnsMean', figure: 'CodeGrep Fig. 2c' },
  {
    name: 'completion-length',
    title: 'Completion length',
    yLabel: 'generated tokens per rollout',
    metric: 'completionLenMean',
    figure: 'CodeGrep Fig. 4a',
  },
  { name: 'grad-norm', title: 'Gradient norm', yLabel: 'grad norm (before clipping)', metric: 'gradNorm', figure: 'CodeGrep Fig. 4b' },
  {
    name: 'clipping-ratio',
    title: 'Completion clipping ratio',
    yLabel: 'rollouts out of budget',
    metric: 'truncatedRatio',
    figure: 'CodeGrep Fig. 4c',
  },
];

export interface TrainingPlot extends Omit<TrainingPlotSpec, 'metric'> {
  svg: string;
  points: number;
}

/** The training plots over steps, one per TRAINING_PLOT_SPECS entry. */
export function trainingPlots(
  rows: readonly ({ step: number } & Partial<Record<NumericMetric, number>>)[],
  smoothing = 0.8,
): TrainingPlot[] {
  return TRAINING_PLOT_SPECS.map((spec) => {
    const points = rows.map((row) => ({ x: row.step, y: row[spec.metric] ?? Number.NaN }));
    return {
      ...spec,
      points: points.filter((p) => Number.isFinite(p.y)).length,
      svg: linePlotSvg({ title: spec.title, xLabel: 'training step', yLabel: spec.yLabel, points, smoothing }),
    };
  });
}

/**
 * The validation curve: the held-out metric of each validated checkpoint (training.validation) over steps, drawn
 * raw (a handful of points), beside the training reward it should follow. Null when nothing was validated.
 */
export function validationPlot(rows: readonly { step: number; metric: string; value: number | null }[]): TrainingPlot | null {
  const points = rows.filter((r) => r.value !== null).map((r) => ({ x: r.step, y: r.value! }));
  if (points.length === 0) return null;
  const metric = rows[0]!.metric;
  return {
    name: 'validation',
    title: 'Validation (held out)',
    yLabel: metric,
    figure: `${metric} of each validated checkpoint on the held-out instances`,
    points: points.length,
    svg: linePlotSvg({ title: 'Validation (held out)', xLabel: 'training step', yLabel: metric, points, smoothing: 0 }),
  };
}
