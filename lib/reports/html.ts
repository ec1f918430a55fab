import type { EvaluationSummary } from '../../schemas/evaluation';
import { escapeHtml } from './format';
import { servedPolicyLine, type ReportArtifacts } from './markdown';
import { histogramSvg, precisionRecallScatterSvg, type PrecisionRecallPoint } from './svg-charts';
import { reportTables, scopeSentence, type ReportTable } from './tables';

/** Per-instance values of one retriever, for its charts. */
export interface RetrieverInstances {
  name: string;
  fBeta: number[];
  points: PrecisionRecallPoint[];
}

const STYLE = `
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; padding: 0 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.3rem 0.7rem; }
th { background: #f4f4f4; } td.right, th.right { text-align: right; font-variant-numeric: tabular-nums; } td.left, th.left { text-align: left; }
p.caption { color: #555; font-size: 0.85rem; margin: 0.2rem 0; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; } figure { margin: 0; } figcaption { font-size: 0.85rem; color: #555; }
code { background: #f4f4f4; padding: 0 0.2rem; }
`;

function htmlTable(table: ReportTable): string {
  const cell = (tag: 'th' | 'td', text: string, i: number) => `<${tag} class="${table.align[i]}">${escapeHtml(text)}</${tag}>`;
  const head = `<tr>${table.headers.map((h, i) => cell('th', h, i)).join('')}</tr>`;
  const body = table.rows.map((row) => `<tr>${row.map((c, i) => cell('td', c, i)).join('')}</tr>`).join('\n');
  return `<section id="${escapeHtml(table.id)}"><h2>${escapeHtml(table.title)}</h2><p class="caption">${escapeHtml(table.caption)}</p>\n<table>\n<thead>${head}</thead>\n<tbody>\n${body}\n</tbody>\n</table></section>`;
}

function chartsSection(instances: readonly RetrieverInstances[]): string {
  const figures = instances.map((r) => {
    const name = escapeHtml(r.name);
    return (
      `<div class="retriever-charts" data-retriever="${name}"><h3>${name}</h3><div class="charts">` +
      `<figure>${histogramSvg(r.fBeta, `${r.name}: per-instance Fβ`)}<figcaption>Per-instance Fβ (${r.fBeta.length} instances)</figcaption></figure>` +
      `<figure>${precisionRecallScatterSvg(r.points, `${r.name}: precision and recall per instance`)}<figcaption>Precision vs recall per instance</figcaption></figure>` +
      `</div></div>`
    );
  });
  return `<section id="charts"><h2>Per-instance distributions</h2>\n${figures.join('\n')}</section>`;
}

/**
 * The evaluation report as one self-contained HTML file: inline CSS, inline SVG charts (a per-instance Fβ
 * histogram and a precision–recall scatter per retriever), no script and no external resource.
 */
export function renderHtmlReport(summary: EvaluationSummary, artifacts: ReportArtifacts, instances: readonly RetrieverInstances[]): string {
  const failed =
    summary.failedRetrievers.length === 0
      ? ''
      : `<section id="failed"><h2>Retrievers that did not finish</h2><ul>${summary.failedRetrievers
          .map((f) => `<li><strong>${escapeHtml(f.name)}</strong>: ${escapeHtml(f.reason)}</li>`)
          .join('')}</ul></section>`;
  const served =
    summary.servedPolicies.length === 0
      ? ''
      : `<section id="served"><h2>Trained policies (the checkpoint that answered)</h2><ul>${summary.servedPolicies
          .map((p) => `<li>${escapeHtml(servedPolicyLine(p).replace(/[*`]/g, ''))}</li>`)
          .join('')}</ul></section>`;
  const title = `Retrieval evaluation — run ${summary.runId}`;
  return [
    '<!DOCTYPE html>',
    '<html lang="en"><head><meta charset="utf-8">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${STYLE}</style></head><body>`,
    `<h1>${escapeHtml(title)}</h1>`,
    `<p>${escapeHtml(scopeSentence(summary))}</p>`,
    ...reportTables(summary).map(htmlTable),
    served,
    failed,
    chartsSection(instances),
    '<section id="artifacts"><h2>Artifacts</h2><ul>',
    `<li>predictions: <code>${escapeHtml(artifacts.predictions)}</code></li>`,
    `<li>per-instance metrics: <code>${escapeHtml(artifacts.metrics)}</code></li>`,
    `<li>summary: <code>${escapeHtml(artifacts.summary)}</code></li>`,
    '</ul></section>',
    '</body></html>',
    '',
  ]
    .filter((line) => line !== '')
    .join('\n')
    .concat('\n');
}
