import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, readManifest, refFromManifest, writeBytesAtomically, writeParquetArtifact } from '../lib/artifacts';
import { trainingPlots, type TrainingPlot } from '../lib/reports/training-plots';
import { pullTrainingRecords } from '../lib/store-sync'; // store (issue #13)
import type { ArtifactRef } from '../schemas/artifact-ref';
import {
  TRAINING_METRICS_SCHEMA_NAME,
  TRAINING_METRICS_SCHEMA_VERSION,
  TrainingReportInputSchema,
  trainingMetricsArrowSchema,
  type TrainingMetricsRow,
  type TrainingReportInput,
  type TrainingReportOutput,
} from '../schemas/training';
import { listSegments, missingSteps, rolloutEngines, runMetricsRows, segmentMetricsPath, trainingLayout } from './training-metrics';

const SMOKE_BANNER =
  'SMOKE RUN: this run checks the plumbing (Temporal, the environment server, the trainer, checkpoints, resume) ' +
  'with a model that cannot learn the task (e.g. a tiny randomly initialised one on CPU). Its numbers mean nothing about CodeGrep.';

function mean(values: readonly number[]): number | null {
  const finite = values.filter((v) => Number.isFinite(v));
  return finite.length === 0 ? null : finite.reduce((a, b) => a + b, 0) / finite.length;
}

function median(values: readonly number[]): number | null {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

const num = (value: number | null, digits = 4) => (value === null ? '–' : String(Number(value.toPrecision(digits))));
const escapeHtml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Summary {
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

function summarize(input: ReturnType<typeof TrainingReportInputSchema.parse>, rows: readonly TrainingMetricsRow[], missing: number[], recipe: [string, string, string][], engines: string[]): Summary {
  const last = rows[rows.length - 1];
  const tailRows = rows.slice(Math.max(0, rows.length - Math.max(1, Math.ceil(rows.length / 10))));
  return {
    rows: [
      ['recipe', input.recipe],
      ['algorithm', input.algorithm],
      ['steps done / budget', `${input.step} / ${input.budget}${input.stoppedEarly ? ' (stopped early at a checkpoint)' : ''}`],
      ['steps with metrics', `${rows.length}${missing.length > 0 ? ` (missing: ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ', …' : ''})` : ''}`],
      ['model', input.modelDir],
      ['rollout engine', engines.length > 0 ? engines.join('; ') : '– (no trainer start line found)'],
      ['median step time', `${num(median(rows.map((r) => r.stepTimeS)), 3)} s (rollout ${num(median(rows.map((r) => r.rolloutTimeS)), 3)} s, update ${num(median(rows.map((r) => r.updateTimeS)), 3)} s)`],
      ['last step', last ? String(last.step) : '–'],
    ],
    tail: [
      ['reward', num(mean(tailRows.map((r) => r.rewardMean)))],
      ['KL to reference', num(mean(tailRows.map((r) => r.kl)))],
      ['turns per rollout', num(mean(tailRows.map((r) => r.turnsMean)))],
      ['tool calls per turn (c̄)', num(mean(tailRows.map((r) => r.toolCallsPerTurnMean)))],
      ['completion tokens per rollout', num(mean(tailRows.map((r) => r.completionLenMean)))],
      ['completion clipping ratio', num(mean(tailRows.map((r) => r.truncatedRatio)))],
      ['answered ratio', num(mean(tailRows.map((r) => r.answeredRatio)))],
    ],
    recipe,
  };
}

function markdown(input: ReturnType<typeof TrainingReportInputSchema.parse>, summary: Summary, plots: TrainingPlot[], tailSteps: number): string {
  const lines = [`# Training report — run \`${input.runId}\``, ''];
  if (input.smokeRun) lines.push(`> **${SMOKE_BANNER}**`, '');
  lines.push('| | |', '| --- | --- |', ...summary.rows.map(([k, v]) => `| ${k} | ${v} |`), '');
  lines.push(`Means over the last ${tailSteps} steps:`, '', '| metric | value |', '| --- | --- |', ...summary.tail.map(([k, v]) => `| ${k} | ${v} |`), '');
  if (summary.recipe.length > 0) {
    lines.push('Effective recipe (what the trainer ran):', '', '| key | value | source |', '| --- | --- | --- |', ...summary.recipe.map(([k, v, s]) => `| ${k} | ${v} | ${s} |`), '');
  }
  for (const plot of plots) lines.push(`![${plot.title} (${plot.figure})](${plot.name}.svg)`, '');
  if (input.notes.length > 0) lines.push('Notes:', '', ...input.notes.map((n) => `- ${n}`), '');
  lines.push('Metrics: `training/metrics.parquet` (one row per step). Checkpoints: `training/trainer/checkpoints/`.', '');
  return lines.join('\n');
}

function html(input: ReturnType<typeof TrainingReportInputSchema.parse>, summary: Summary, plots: TrainingPlot[], tailSteps: number): string {
  const table = (rows: [string, string][]) => `<table>${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`).join('')}</table>`;
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
    input.notes.length > 0 ? `<h2>Notes</h2><ul>${input.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join('')}</ul>` : '',
    '</body></html>',
    '',
  ].join('\n');
}

/**
 * After the training loop: every step of the run once (the segments' metrics Parquet files, newest record of
 * a step wins, nothing above the final checkpoint) as `training/metrics.parquet`, the SVG plots of CodeGrep
 * Fig. 2 / Fig. 4, and a small HTML + Markdown report under `training/report/`.
 */
export async function writeTrainingReport(rawInput: TrainingReportInput): Promise<TrainingReportOutput> {
  const input = TrainingReportInputSchema.parse(rawInput);
  // store (issue #13): the segments' logs, metrics and recipe come from the store (never the checkpoints)
  if (input.store) await pullTrainingRecords(input.store, input.runId, input.runDir);
  const layout = trainingLayout(input.runDir);
  const rows = await runMetricsRows(input.runDir, input.step);
  const missing = missingSteps(rows, input.step);
  const inputs: ArtifactRef[] = [];
  for (const segment of listSegments(input.runDir)) {
    const file = segmentMetricsPath(input.runDir, segment);
    if (!existsSync(file)) continue;
    const read = await readManifest(file);
    if (read.status === 'ok') inputs.push(refFromManifest(read.manifest));
  }
  const metrics = await writeParquetArtifact({
    path: layout.merged,
    schemaName: TRAINING_METRICS_SCHEMA_NAME,
    schemaVersion: TRAINING_METRICS_SCHEMA_VERSION,
    arrowSchema: trainingMetricsArrowSchema,
    rows,
    inputs,
    configHash: hashConfig({ stage: 'training-report', step: input.step }),
  });

  const plots = trainingPlots(rows);
  const plotFiles: string[] = [];
  for (const plot of plots) {
    const file = path.join(layout.report, `${plot.name}.svg`);
    await writeBytesAtomically(file, plot.svg);
    plotFiles.push(file);
  }
  const summary = summarize(input, rows, missing, effectiveRecipeRows(layout.trainerOutput), rolloutEngines(input.runDir));
  const tailSteps = Math.max(1, Math.ceil(rows.length / 10));
  const htmlFile = path.join(layout.report, 'index.html');
  const markdownFile = path.join(layout.report, 'report.md');
  await writeBytesAtomically(htmlFile, html(input, summary, plots, tailSteps));
  await writeBytesAtomically(markdownFile, markdown(input, summary, plots, tailSteps));
  if (input.smokeRun) log.warn(`training report: ${SMOKE_BANNER}`);
  if (missing.length > 0) log.warn('training report: steps without metrics', { missing: missing.slice(0, 20), count: missing.length });
  return {
    metrics,
    steps: rows.length,
    firstStep: rows[0]?.step ?? null,
    lastStep: rows[rows.length - 1]?.step ?? null,
    missingSteps: missing,
    html: htmlFile,
    markdown: markdownFile,
    plots: plotFiles,
    smokeRun: input.smokeRun,
  };
}
