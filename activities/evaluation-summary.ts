import path from 'node:path';
import { log } from '@temporalio/activity';
import { findCachedArtifact, hashConfig, readRows, writeBytesAtomically, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { F_BETA, HIGH_QUALITY_F_THRESHOLD } from '../lib/metrics/params';
import { renderHtmlReport, renderMarkdownReport, summarizeRetriever, type RetrieverInstances, type ScoredInstance } from '../lib/reports';
import type { ArtifactRef } from '../schemas/artifact-ref';
import {
  EVALUATION_METRICS_SCHEMA_NAME,
  EVALUATION_PREDICTIONS_SCHEMA_NAME,
  EVALUATION_SCHEMA_VERSION,
  EVALUATION_SUMMARY_SCHEMA_NAME,
  EvaluationShardRowSchema,
  METRIC_COLUMNS,
  PREDICTION_COLUMNS,
  SummarizeEvaluationInputSchema,
  evaluationPredictionsArrowSchema,
  instanceMetricsArrowSchema,
  type EvaluationShardRow,
  type EvaluationSummary,
  type SummarizeEvaluationInput,
  type SummarizeEvaluationOutput,
} from '../schemas/evaluation';
import { ProgressReporter } from './kit';

async function readShardRows(refs: readonly ArtifactRef[]): Promise<EvaluationShardRow[]> {
  const rows: EvaluationShardRow[] = [];
  for (const ref of refs) {
    for await (const record of readRows(ref.uri)) {
      if ('error' in record) throw new Error(`evaluation shard ${ref.uri} row ${record.ordinal}: ${record.error}`);
      const parsed = EvaluationShardRowSchema.safeParse(record.row);
      if (!parsed.success)
        throw new Error(
          `evaluation shard ${ref.uri} row ${record.ordinal}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        );
      rows.push(parsed.data);
    }
  }
  return rows;
}

function project(row: Record<string, unknown>, columns: readonly string[]): Record<string, unknown> {
  return Object.fromEntries(columns.map((c) => [c, row[c]]));
}

async function mergedArtifact(
  file: string,
  schemaName: string,
  arrowSchema: typeof evaluationPredictionsArrowSchema,
  columns: readonly string[],
  rows: readonly EvaluationShardRow[],
  inputs: ArtifactRef[],
): Promise<ArtifactRef> {
  const expectation = {
    schemaName,
    schemaVersion: EVALUATION_SCHEMA_VERSION,
    inputs,
    configHash: hashConfig({ stage: schemaName, columns }),
  };
  return (
    (await findCachedArtifact(file, expectation)) ??
    writeParquetArtifact({ path: file, arrowSchema, rows: rows.map((r) => project(r, columns)), ...expectation })
  );
}

/**
 * The evaluation's summary: merges the shards into `predictions.parquet` and `metrics.parquet` (all retrievers,
 * one row per retriever × instance), summarises each retriever (CodeGrep Table 2, CodeScout Table 3, Acc@k,
 * bootstrap intervals) into `summary.json`, and renders `report.md` and a self-contained `report.html`.
 */
export async function summarizeEvaluation(rawInput: SummarizeEvaluationInput): Promise<SummarizeEvaluationOutput> {
  const input = SummarizeEvaluationInputSchema.parse(rawInput);
  const keepAlive = new ProgressReporter();
  try {
    const outputDir = input.plan.outputDir;
    const shardRefs = input.shards.flatMap((s) => s.refs);
    keepAlive.report({ stage: 'report', done: 0, total: 3, unit: 'steps', counts: {} });
    const rows = await readShardRows(shardRefs);
    const predictions = await mergedArtifact(
      path.join(outputDir, 'predictions.parquet'),
      EVALUATION_PREDICTIONS_SCHEMA_NAME,
      evaluationPredictionsArrowSchema,
      PREDICTION_COLUMNS,
      rows,
      shardRefs,
    );
    const metrics = await mergedArtifact(
      path.join(outputDir, 'metrics.parquet'),
      EVALUATION_METRICS_SCHEMA_NAME,
      instanceMetricsArrowSchema,
      METRIC_COLUMNS,
      rows,
      shardRefs,
    );
    keepAlive.report({ stage: 'report', done: 1, total: 3, unit: 'steps', counts: {} });

    const { bootstrap } = input.evaluation;
    const byRetriever = new Map<string, EvaluationShardRow[]>();
    for (const row of rows) {
      const own = byRetriever.get(row.retriever);
      if (own) own.push(row);
      else byRetriever.set(row.retriever, [row]);
    }
    const finished = input.evaluation.retrievers.filter((r) => input.shards.some((s) => s.retriever === r.name));
    const summary: EvaluationSummary = {
      runId: input.runId,
      instances: input.plan.instances,
      excluded: input.plan.excluded,
      fileTarget: input.evaluation.fileTarget,
      beta: F_BETA,
      highQualityThreshold: HIGH_QUALITY_F_THRESHOLD,
      bootstrap,
      retrievers: finished.map((r) => summarizeRetriever(r.name, r.kind, (byRetriever.get(r.name) ?? []) as ScoredInstance[], bootstrap)),
      failedRetrievers: input.failedRetrievers,
    };
    keepAlive.report({ stage: 'report', done: 2, total: 3, unit: 'steps', counts: {} });
    const summaryRef = await writeJsonArtifact(path.join(outputDir, 'summary.json'), summary, {
      schemaName: EVALUATION_SUMMARY_SCHEMA_NAME,
      schemaVersion: EVALUATION_SCHEMA_VERSION,
      inputs: [predictions, metrics],
      configHash: hashConfig({ stage: 'evaluation-summary', bootstrap, failedRetrievers: input.failedRetrievers }),
    });

    // The report sits next to the artifacts it names.
    const artifacts = { predictions: 'predictions.parquet', metrics: 'metrics.parquet', summary: 'summary.json' };
    const instances: RetrieverInstances[] = finished.map((r) => {
      const own = byRetriever.get(r.name) ?? [];
      return {
        name: r.name,
        fBeta: own.map((row) => row.fileFBeta),
        points: own.map((row) => ({ precision: row.filePrecision, recall: row.fileRecall, label: row.instanceId })),
      };
    });
    const markdown = path.join(outputDir, 'report.md');
    const html = path.join(outputDir, 'report.html');
    await writeBytesAtomically(markdown, renderMarkdownReport(summary, artifacts));
    await writeBytesAtomically(html, renderHtmlReport(summary, artifacts, instances));
    log.info('evaluation: report written', { markdown, html, retrievers: summary.retrievers.length });
    return { predictions, metrics, summary: summaryRef, report: { markdown, html }, summaryValues: summary };
  } finally {
    keepAlive.close();
  }
}
