import { bestValidatedStep } from './validation-choice';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { mean, median } from '../metrics/summary';
import { escapeHtml } from '../reports/format';
import type { TrainingPlot } from '../reports/training-plots';
import type { TrainingReportRequest } from '../../schemas/training/activity-io';
import type { TrainingMetricsRow } from '../../schemas/training/metrics';

/** The training report's content (a summary table, the tail means, the effective recipe, the plots), as Markdown and HTML. */

export const SMOKE_BANNER =
  'SMOKE RUN: this run checks the plumbing (Temporal, the environment server, the trainer, checkpoints, resume) ' +
  'with a model that cannot learn the task (e.g. a tiny randomly initialised one on CPU). Its numbers mean nothing about CodeGrep.';

// A step with no KL (NaN) or a missing timing must not poison a summary: the report summarises the finite values.
function finiteSummary(values: readonly number[], of: (finite: readonly number[]) => number): number | null {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length === 0 ? null : of(finite);
}
const finiteMean = (values: readonly number[]) => finiteSummary(values, mean);
const finiteMedian = (values: readonly number[]) => finiteSummary(values, median);

const num = (value: number | null, digits = 4) => (value === null ? '–' : String(Number(value.toPrecision(digits))));

export interface TrainingSummary {
  rows: [string, string][];
  tail: [string, string][];
  /** The effective recipe the trainer ran: key, value, where the value came from. */
  recipe: [string, string, string][];
}

/**
 * The effective recipe the trainer resolved and wrote to `<trainer output>/recipe.json` (trainer/recipes.py:
 * the preset of lib/recipes/presets.json, the algorithm's loss shape, then explicit config keys), as
 * [key, value, source] rows; [] when the trainer wrote none.
 */
export function effectiveRecipeRows(trainerOutputDir: string): [string, string, string][] {
  const file = path.join(trainerOutputDir, 'recipe.json');
  if (!existsSync(file)) return [];
  const recipe = JSON.parse(readFileSync(file, 'utf8')) as Record<string, { value: unknown; source: string }>;
  return Object.entries(recipe).map(([key, entry]) => [key, JSON.stringify(entry.value), entry.source]);
}

/**
 * How stale the rollouts the steps learned from were (CodeScout §3.4's asynchronous training): "max k" is the
 * most steps a sampling policy lagged the updated weights. Rows of runs recorded before the trainer wrote
 * staleness (metrics schema version 1) have none.
 */
export function stalenessLine(rows: readonly Pick<TrainingMetricsRow, 'staleness'>[]): string {
  const recorded = rows.map((r) => r.staleness ?? null).filter((k): k is number => k !== null);
  if (recorded.length === 0) return '– (not recorded by this trainer)';
  const max = recorded.reduce((a, b) => Math.max(a, b), 0);
  const note = recorded.length < rows.length ? `, ${rows.length - recorded.length} steps without it` : '';
  return `staleness max ${max}, mean ${num(mean(recorded), 3)} over ${recorded.length} steps${note}`;
}

export function summarizeTraining(
  input: TrainingReportRequest,
  rows: readonly TrainingMetricsRow[],
  missing: number[],
  recipe: [string, string, string][],
  engines: string[],
): TrainingSummary {
  const last = rows[rows.length - 1];
  const tailRows = rows.slice(Math.max(0, rows.length - Math.max(1, Math.ceil(rows.length / 10))));
  return {
    rows: [
      ['recipe', input.recipe],
      ['algorithm', input.algorithm],
      ['steps done / budget', `${input.step} / ${input.budget}${input.stoppedEarly ? ' (stopped early at a checkpoint)' : ''}`],
      [
        'steps with metrics',
        `${rows.length}${missing.length > 0 ? ` (missing: ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ', …' : ''})` : ''}`,
      ],
      ['model', input.modelDir],
      ['rollout engine', engines.length > 0 ? engines.join('; ') : '– (no trainer start line found)'],
      [
        'median step time',
        `${num(finiteMedian(rows.map((r) => r.stepTimeS)), 3)} s (rollout ${num(finiteMedian(rows.map((r) => r.rolloutTimeS)), 3)} s, update ${num(finiteMedian(rows.map((r) => r.updateTimeS)), 3)} s)`,
      ],
      ['last step', last ? String(last.step) : '–'],
      ['rollout staleness (policy versions behind)', stalenessLine(rows)],
    ],
    tail: [
      ['reward', num(finiteMean(tailRows.map((r) => r.rewardMean)))],
      ['KL to reference', num(finiteMean(tailRows.map((r) => r.kl)))],
      ['turns per rollout', num(finiteMean(tailRows.map((r) => r.turnsMean)))],
      ['tool calls per turn (c̄)', num(finiteMean(tailRows.map((r) => r.toolCallsPerTurnMean)))],
      ['completion tokens per rollout', num(finiteMean(tailRows.map((r) => r.completionLenMean)))],
      ['completion clipping ratio', num(finiteMean(tailRows.map((r) => r.truncatedRatio)))],
      ['answered ratio', num(finiteMean(tailRows.map((r) => r.answeredRatio)))],
    ],
    recipe,
  };
}

export function trainingReportMarkdown(
  input: TrainingReportRequest,
  summary: TrainingSummary,
  plots: TrainingPlot[],
  tailSteps: number,
): string {
  const lines = [`# Training report — run \`${input.runId}\``, ''];
  if (input.smokeRun) lines.push(`> **${SMOKE_BANNER}**`, '');
  lines.push('| | |', '| --- | --- |', ...summary.rows.map(([k, v]) => `| ${k} | ${v} |`), '');
  lines.push(
    `Means over the last ${tailSteps} steps:`,
    '',
    '| metric | value |',
    '| --- | --- |',
    ...summary.tail.map(([k, v]) => `| ${k} | ${v} |`),
    '',
  );
  if (summary.recipe.length > 0) {
    lines.push(
      'Effective recipe (what the trainer ran):',
      '',
      '| key | value | source |',
      '| --- | --- | --- |',
      ...summary.recipe.map(([k, v, s]) => `| ${k} | ${v} | ${s} |`),
      '',
    );
  }
  for (const plot of plots) lines.push(`![${plot.title} (${plot.figure})](${plot.name}.svg)`, '');
  if (input.validation.length > 0) {
    lines.push(
      `Validation (held out; \`checkpoint: best\` is step ${bestValidatedStep(input.validation) ?? '–'}):`,
      '',
      '| step | metric | value | instances | failed | adapter sha256 |',
      '| --- | --- | --- | --- | --- | --- |',
      ...input.validation.map(
        (v) =>
          `| ${v.step} | ${v.metric} | ${v.value === null ? '–' : v.value.toFixed(3)} | ${v.instances} | ${v.failed} | ${v.adapterSha256.slice(0, 12)} |`,
      ),
      '',
    );
  }
  if (input.notes.length > 0) lines.push('Notes:', '', ...input.notes.map((n) => `- ${n}`), '');
  lines.push('Metrics: `training/metrics.parquet` (one row per step). Checkpoints: `training/trainer/checkpoints/`.', '');
  return lines.join('\n');
}

export function trainingReportHtml(
  input: TrainingReportRequest,
  summary: TrainingSummary,
  plots: TrainingPlot[],
  tailSteps: number,
): string {
  const table = (rows: [string, string][]) =>
    `<table>${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('')}</table>`;
  return [
    '<!doctype html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>Training report — ${escapeHtml(input.runId)}</title>`,
    '<style>body{font-family:Helvetica,Arial,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ddd;padding:4px 10px;text-align:left}.smoke{background:#fff3cd;border:1px solid #e0b000;padding:1em;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0}figcaption{font-size:12px;color:#666}</style>',
    '</head><body>',
    `<h1>Training report — run <code>${escapeHtml(input.runId)}</code></h1>`,
    input.smokeRun ? `<p class="smoke">${escapeHtml(SMOKE_BANNER)}</p>` : '',
    table(summary.rows),
    `<h2>Means over the last ${tailSteps} steps</h2>`,
    table(summary.tail),
    summary.recipe.length > 0
      ? `<h2>Effective recipe</h2><table><tr><th>key</th><th>value</th><th>source</th></tr>${summary.recipe.map((r) => `<tr>${r.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`).join('')}</table>`
      : '',
    '<h2>Training curves</h2>',
    '<div class="plots">',
    ...plots.map((p) => `<figure>${p.svg}<figcaption>${escapeHtml(p.figure)}</figcaption></figure>`),
    '</div>',
    input.validation.length > 0
      ? `<h2>Validation (checkpoint: best is step ${bestValidatedStep(input.validation) ?? '–'})</h2><table><tr><th>step</th><th>metric</th><th>value</th><th>instances</th><th>failed</th><th>adapter sha256</th></tr>${input.validation
          .map(
            (v) =>
              `<tr>${[String(v.step), v.metric, v.value === null ? '–' : v.value.toFixed(3), String(v.instances), String(v.failed), v.adapterSha256.slice(0, 12)].map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`,
          )
          .join('')}</table>`
      : '',
    input.notes.length > 0 ? `<h2>Notes</h2><ul>${input.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>` : '',
    '</body></html>',
    '',
  ].join('\n');
}
