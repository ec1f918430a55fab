import type { EvaluationSummary } from '../../schemas/evaluation';
import { markdownCell } from './format';
import { reportTables, scopeSentence, type ReportTable } from './tables';

export interface ReportArtifacts {
  /** Paths shown at the end of the report (as given: absolute, or relative to the report). */
  predictions: string;
  metrics: string;
  summary: string;
}

function markdownTable(table: ReportTable): string {
  const separator = table.align.map((a) => (a === 'right' ? '---:' : '---'));
  const line = (cells: string[]) => `| ${cells.map(markdownCell).join(' | ')} |`;
  return [`## ${table.title}`, '', table.caption, '', line(table.headers), `| ${separator.join(' | ')} |`, ...table.rows.map(line)].join(
    '\n',
  );
}

/** The evaluation report as Markdown: the tables of reportTables(), failed retrievers, and the artifacts. */
export function renderMarkdownReport(summary: EvaluationSummary, artifacts: ReportArtifacts): string {
  const parts = [`# Retrieval evaluation — run \`${summary.runId}\``, '', scopeSentence(summary)];
  for (const table of reportTables(summary)) parts.push('', markdownTable(table));
  if (summary.servedPolicies.length > 0) {
    parts.push('', '## Trained policies (the checkpoint that answered)', '');
    for (const p of summary.servedPolicies) parts.push(`- ${servedPolicyLine(p)}`);
  }
  if (summary.failedRetrievers.length > 0) {
    parts.push('', '## Retrievers that did not finish', '');
    for (const failed of summary.failedRetrievers) parts.push(`- **${failed.name}**: ${markdownCell(failed.reason)}`);
  }
  parts.push(
    '',
    '## Artifacts',
    '',
    `- predictions: \`${artifacts.predictions}\``,
    `- per-instance metrics: \`${artifacts.metrics}\``,
    `- summary: \`${artifacts.summary}\``,
  );
  return `${parts.join('\n')}\n`;
}

/** One trained-policy retriever's checkpoint, as every report names it. */
export function servedPolicyLine(p: EvaluationSummary['servedPolicies'][number]): string {
  return `**${p.retriever}**: run \`${p.runId}\` step ${p.step} (served as \`${p.model}\`, ${p.backend}), base model \`${p.baseModel}\`, adapter sha256 \`${p.adapterSha256}\`, ${p.answerFormat} answers, ${p.maxTurns ?? 'default'} turns`;
}
