import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, writeBytesAtomically, writeJsonArtifact } from '../lib/artifacts';
import { mergeShards } from '../lib/evaluation/merge-shards';
import { F_BETA, HIGH_QUALITY_F_THRESHOLD } from '../lib/metrics/params';
import { renderHtmlReport, renderMarkdownReport, summarizeRetriever, type RetrieverInstances, type ScoredInstance } from '../lib/reports';
import {
  EVALUATION_SCHEMA_VERSION,
  EVALUATION_SUMMARY_SCHEMA_NAME,
  SummarizeEvaluationInputSchema,
  type EvaluationShardRow,
  type EvaluationSummary,
  type SummarizeEvaluationInput,
  type SummarizeEvaluationOutput,
} from '../schemas/evaluation';
import { ProgressReporter } from './kit';

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
    const { rows, predictions, metrics } = await mergeShards(outputDir, shardRefs);
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
      servedPolicies: finished.flatMap((r) =>
        r.kind === 'agent' && r.served
          ? [
              {
                retriever: r.name,
                runId: r.served.runId,
                step: r.served.step,
                adapterSha256: r.served.adapterSha256,
                baseModel: r.served.baseModel,
                model: r.served.model,
                backend: r.served.backend,
                answerFormat: r.answerFormat ?? 'codegrep',
                maxTurns: r.limits?.maxTurns ?? null,
              },
            ]
          : [],
      ),
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
