import { log } from '@temporalio/activity';
import { hashConfig, writeBytesAtomically, writeJsonArtifact, writeParquetArtifact } from '../lib/artifacts';
import { downstreamPaths } from '../lib/downstream/layout';
import { downstreamTable } from '../lib/downstream/report/metrics';
import { countBy, downstreamReportBlocks } from '../lib/downstream/report/report';
import { renderDownstreamHtml, renderDownstreamMarkdown } from '../lib/downstream/report/report-render';
import { finishedRows, loadPlan } from '../lib/downstream/runs/run-records';
import {
  SummarizeDownstreamInputSchema,
  type DownstreamSummaryOutput,
  type SummarizeDownstreamInput,
} from '../schemas/downstream/activity-io';
import { DOWNSTREAM_RUNS_SCHEMA_NAME, DOWNSTREAM_RUNS_SCHEMA_VERSION, downstreamRunsArrowSchema } from '../schemas/downstream/runs';
import { DOWNSTREAM_TABLE_SCHEMA_NAME, DOWNSTREAM_TABLE_SCHEMA_VERSION } from '../schemas/downstream/table';
import { invalidInput, rethrowAsFailure } from './kit';

/**
 * The downstream stage's results from the run records of the plan: `downstream/runs.parquet` (one row per
 * (configuration, instance), schema downstream.runs), `downstream/table.json` (CodeGrep Table 3 per
 * configuration, pooled and paired against the baseline, bootstrap intervals, McNemar; lib/downstream),
 * `downstream/report.md` and the self-contained `downstream/report.html`.
 */
export async function summarizeDownstream(rawInput: SummarizeDownstreamInput): Promise<DownstreamSummaryOutput> {
  const input = SummarizeDownstreamInputSchema.parse(rawInput);
  const plan = await loadPlan(input.plan).catch(rethrowAsFailure);
  const paths = downstreamPaths(input.runDir);

  const { rows, recordShas, missing } = await finishedRows(plan);
  if (missing.length > 0) {
    throw invalidInput(
      `downstream summary: ${missing.length} of ${plan.pairs.length} runs have no finished record under ${paths.records}: ` +
        `${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}`,
    );
  }

  const configHash = hashConfig({ stage: 'downstream-summary', records: recordShas, baseline: plan.baseline, bootstrap: input.bootstrap });
  const runs = await writeParquetArtifact({
    path: paths.runsParquet,
    schemaName: DOWNSTREAM_RUNS_SCHEMA_NAME,
    schemaVersion: DOWNSTREAM_RUNS_SCHEMA_VERSION,
    arrowSchema: downstreamRunsArrowSchema,
    rows,
    inputs: [input.plan],
    configHash,
  });

  const tableValues = downstreamTable(rows, {
    baseline: plan.baseline,
    order: plan.configurations.map((c) => c.name),
    bootstrap: input.bootstrap,
  });
  const outcomes = countBy(rows, (r) => r.outcome);
  const endReasons = countBy(rows, (r) => r.endReason);
  const table = await writeJsonArtifact(
    paths.tableJson,
    {
      ...tableValues,
      outcomes,
      endReasons,
      configurations: plan.configurations,
      instances: plan.instances.length,
      agent: plan.agent,
      harness: plan.harness,
    },
    { schemaName: DOWNSTREAM_TABLE_SCHEMA_NAME, schemaVersion: DOWNSTREAM_TABLE_SCHEMA_VERSION, inputs: [runs], configHash },
  );

  const blocks = downstreamReportBlocks({
    plan,
    table: tableValues,
    rows,
    bootstrap: input.bootstrap,
    generatedAt: new Date().toISOString(),
  });
  await writeBytesAtomically(paths.reportMarkdown, renderDownstreamMarkdown(blocks));
  await writeBytesAtomically(paths.reportHtml, renderDownstreamHtml(blocks));
  log.info('downstream summary', { runs: rows.length, report: paths.reportMarkdown });
  return { runs, table, tableValues, outcomes, endReasons, reportMarkdown: paths.reportMarkdown, reportHtml: paths.reportHtml };
}
