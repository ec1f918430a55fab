import { existsSync } from 'node:fs';
import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, readManifest, refFromManifest, writeBytesAtomically, writeParquetArtifact } from '../lib/artifacts';
import { trainingPlots, validationPlot } from '../lib/reports/training-plots';
import { pullTrainingRecords } from '../lib/store-sync';
import { openRunStore, type ActivityDeps } from './kit';
import {
  SMOKE_BANNER,
  effectiveRecipeRows,
  listSegments,
  missingSteps,
  rolloutEngines,
  runMetricsRows,
  segmentMetricsPath,
  summarizeTraining,
  trainingLayout,
  trainingReportHtml,
  trainingReportMarkdown,
} from '../lib/training';
import type { ArtifactRef } from '../schemas/artifact-ref';
import { TrainingReportInputSchema, type TrainingReportInput, type TrainingReportOutput } from '../schemas/training/activity-io';
import { TRAINING_METRICS_SCHEMA_NAME, TRAINING_METRICS_SCHEMA_VERSION, trainingMetricsArrowSchema } from '../schemas/training/metrics';

/**
 * After the training loop: every step of the run once (the segments' metrics Parquet files, newest record of
 * a step wins, nothing above the final checkpoint) as `training/metrics.parquet`, the SVG plots of CodeGrep
 * Fig. 2 / Fig. 4 and of the validation curve, and a small HTML + Markdown report under `training/report/`.
 */
export function makeWriteTrainingReport(deps: Pick<ActivityDeps, 'store'>): (input: TrainingReportInput) => Promise<TrainingReportOutput> {
  return (input) => writeTrainingReport(deps, input);
}

async function writeTrainingReport(deps: Pick<ActivityDeps, 'store'>, rawInput: TrainingReportInput): Promise<TrainingReportOutput> {
  const input = TrainingReportInputSchema.parse(rawInput);
  // With a run store (README "Deployment: several machines") the segments' logs, metrics and recipe come from it (never the checkpoints).
  if (input.store) await pullTrainingRecords(openRunStore(deps, input.store), input.runId, input.runDir);
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

  const validationCurve = validationPlot(input.validation);
  const plots = validationCurve ? [...trainingPlots(rows), validationCurve] : trainingPlots(rows);
  const plotFiles: string[] = [];
  for (const plot of plots) {
    const file = path.join(layout.report, `${plot.name}.svg`);
    await writeBytesAtomically(file, plot.svg);
    plotFiles.push(file);
  }
  const summary = summarizeTraining(input, rows, missing, effectiveRecipeRows(layout.trainerOutput), rolloutEngines(input.runDir));
  const tailSteps = Math.max(1, Math.ceil(rows.length / 10));
  const htmlFile = path.join(layout.report, 'index.html');
  const markdownFile = path.join(layout.report, 'report.md');
  await writeBytesAtomically(htmlFile, trainingReportHtml(input, summary, plots, tailSteps));
  await writeBytesAtomically(markdownFile, trainingReportMarkdown(input, summary, plots, tailSteps));
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
