import { escapeHtml } from './format';
import { HISTOGRAM_BINS } from './params';

/**
 * Inline SVG charts for the self-contained HTML report: plain elements, no script, no external style, so the
 * file renders the same offline, in a mail client or as a CI artifact.
 */

const WIDTH = 360;
const HEIGHT = 240;
const MARGIN = { left: 44, right: 12, top: 16, bottom: 40 };
const PLOT_W = WIDTH - MARGIN.left - MARGIN.right;
const PLOT_H = HEIGHT - MARGIN.top - MARGIN.bottom;

const round = (v: number) => Math.round(v * 100) / 100;

/** Counts of values in `bins` equal-width bins over [0, 1]; 1.0 falls in the last bin. */
export function histogramCounts(values: readonly number[], bins: number = HISTOGRAM_BINS): number[] {
  if (!Number.isInteger(bins) || bins < 1) throw new RangeError(`bins must be a positive integer, got ${bins}`);
  const counts = new Array<number>(bins).fill(0);
  values.forEach((v, i) => {
    if (!Number.isFinite(v) || v < 0 || v > 1) throw new RangeError(`histogram value #${i} is ${v}, outside [0, 1]`);
    counts[Math.min(bins - 1, Math.floor(v * bins))]! += 1;
  });
  return counts;
}

function axes(xLabel: string, yLabel: string, yMax: number, yTicks: number[], xTicks: number[]): string {
  const parts: string[] = [];
  const x0 = MARGIN.left;
  const y0 = MARGIN.top + PLOT_H;
  parts.push(`<line x1="${x0}" y1="${y0}" x2="${x0 + PLOT_W}" y2="${y0}" stroke="#333"/>`);
  parts.push(`<line x1="${x0}" y1="${MARGIN.top}" x2="${x0}" y2="${y0}" stroke="#333"/>`);
  for (const t of xTicks) {
    const x = round(x0 + t * PLOT_W);
    parts.push(`<line x1="${x}" y1="${y0}" x2="${x}" y2="${y0 + 4}" stroke="#333"/>`);
    parts.push(`<text x="${x}" y="${y0 + 16}" font-size="10" text-anchor="middle">${t.toFixed(1)}</text>`);
  }
  for (const t of yTicks) {
    const y = round(y0 - (yMax === 0 ? 0 : t / yMax) * PLOT_H);
    parts.push(`<line x1="${x0 - 4}" y1="${y}" x2="${x0}" y2="${y}" stroke="#333"/>`);
    parts.push(`<text x="${x0 - 6}" y="${y + 3}" font-size="10" text-anchor="end">${Number.isInteger(t) ? t : t.toFixed(1)}</text>`);
  }
  parts.push(`<text x="${x0 + PLOT_W / 2}" y="${HEIGHT - 6}" font-size="11" text-anchor="middle">${escapeHtml(xLabel)}</text>`);
  parts.push(
    `<text x="12" y="${MARGIN.top + PLOT_H / 2}" font-size="11" text-anchor="middle" transform="rotate(-90 12 ${MARGIN.top + PLOT_H / 2})">${escapeHtml(yLabel)}</text>`,
  );
  return parts.join('');
}

function svg(title: string, body: string): string {
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${escapeHtml(title)}">` +
    `<title>${escapeHtml(title)}</title>${body}</svg>`
  );
}

/** Histogram of per-instance Fβ over [0, 1] (one bar per bin, labelled with its count). */
export function histogramSvg(values: readonly number[], title: string, bins: number = HISTOGRAM_BINS): string {
  const counts = histogramCounts(values, bins);
  const yMax = Math.max(1, ...counts);
  const barW = PLOT_W / bins;
  const bars = counts.map((count, i) => {
    const h = (count / yMax) * PLOT_H;
    const x = round(MARGIN.left + i * barW + 1);
    const y = round(MARGIN.top + PLOT_H - h);
    const range = `${(i / bins).toFixed(1)}–${((i + 1) / bins).toFixed(1)}`;
    return (
      `<rect class="bar" x="${x}" y="${y}" width="${round(barW - 2)}" height="${round(h)}" fill="#4e79a7"><title>Fβ ${range}: ${count}</title></rect>` +
      (count > 0 ? `<text x="${round(x + (barW - 2) / 2)}" y="${round(y - 3)}" font-size="9" text-anchor="middle">${count}</text>` : '')
    );
  });
  const yTicks = [0, Math.ceil(yMax / 2), yMax].filter((t, i, all) => all.indexOf(t) === i);
  const xTicks = Array.from({ length: 6 }, (_, i) => i / 5);
  return svg(title, axes('Fβ per instance', 'instances', yMax, yTicks, xTicks) + bars.join(''));
}

export interface PrecisionRecallPoint {
  precision: number;
  recall: number;
  /** Shown on hover. */
  label: string;
}

/**
 * Precision (x) against recall (y) per instance. Instances with the same pair are drawn as one circle whose
 * area grows with their count, so a pile of identical (0, 0) points is visible as such.
 */
export function precisionRecallScatterSvg(points: readonly PrecisionRecallPoint[], title: string): string {
  const groups = new Map<string, { precision: number; recall: number; labels: string[] }>();
  points.forEach((p, i) => {
    for (const [name, v] of [
      ['precision', p.precision],
      ['recall', p.recall],
    ] as const) {
      if (!Number.isFinite(v) || v < 0 || v > 1) throw new RangeError(`scatter point #${i}: ${name} is ${v}, outside [0, 1]`);
    }
    const key = `${p.precision.toFixed(4)},${p.recall.toFixed(4)}`;
    const group = groups.get(key) ?? { precision: p.precision, recall: p.recall, labels: [] };
    group.labels.push(p.label);
    groups.set(key, group);
  });
  const circles = [...groups.values()].map((g) => {
    const cx = round(MARGIN.left + g.precision * PLOT_W);
    const cy = round(MARGIN.top + PLOT_H - g.recall * PLOT_H);
    const r = round(3 + 2 * Math.sqrt(g.labels.length - 1));
    const shown = g.labels.slice(0, 10).join(', ') + (g.labels.length > 10 ? `, … (${g.labels.length})` : '');
    return `<circle class="point" cx="${cx}" cy="${cy}" r="${r}" fill="#e15759" fill-opacity="0.6"><title>P ${g.precision.toFixed(3)}, R ${g.recall.toFixed(3)}: ${escapeHtml(shown)}</title></circle>`;
  });
  const ticks = Array.from({ length: 6 }, (_, i) => i / 5);
  return svg(title, axes('precision', 'recall', 1, ticks, ticks) + circles.join(''));
}
