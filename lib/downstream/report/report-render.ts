import { escapeHtml, markdownCell } from '../../reports/format';
import type { ReportBlock } from './report';

// The downstream report's blocks as Markdown and as a whole HTML document (inline style, no script, nothing fetched).

const TITLE = 'Downstream injection';

export function renderDownstreamMarkdown(blocks: readonly ReportBlock[]): string {
  const out: string[] = [`# ${TITLE}`, ''];
  for (const block of blocks) {
    switch (block.kind) {
      case 'heading':
        out.push(`## ${block.text}`, '');
        break;
      case 'paragraph':
        out.push(block.text, '');
        break;
      case 'list':
        out.push(...block.items.map((item) => `- ${item.replace(/\r?\n/g, ' ')}`), '');
        break;
      case 'table':
        out.push(`| ${block.header.map(markdownCell).join(' | ')} |`, `|${' --- |'.repeat(block.header.length)}`);
        out.push(...block.rows.map((row) => `| ${row.map(markdownCell).join(' | ')} |`), '');
        break;
    }
  }
  return `${out.join('\n').trimEnd()}\n`;
}

const STYLE = `
  body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem; color: #1f2328; }
  section.codegrep-stage h1 { font-size: 1.5rem; margin: 0 0 .75rem; }
  section.codegrep-stage h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; border-bottom: 1px solid #d0d7de; padding-bottom: .2rem; }
  section.codegrep-stage table { border-collapse: collapse; margin: .5rem 0; font-variant-numeric: tabular-nums; }
  section.codegrep-stage th, section.codegrep-stage td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; vertical-align: top; }
  section.codegrep-stage th { background: #f6f8fa; }
  section.codegrep-stage tbody tr:nth-child(even) { background: #fbfcfd; }
  section.codegrep-stage p, section.codegrep-stage li { max-width: 70rem; }
`;

/** A whole HTML document holding one `<section id="downstream">`, readable on its own or lifted into a bigger report. */
export function renderDownstreamHtml(blocks: readonly ReportBlock[]): string {
  const body: string[] = [`<h1>${TITLE}</h1>`];
  for (const block of blocks) {
    switch (block.kind) {
      case 'heading':
        body.push(`<h2>${escapeHtml(block.text)}</h2>`);
        break;
      case 'paragraph':
        body.push(`<p>${escapeHtml(block.text)}</p>`);
        break;
      case 'list':
        body.push(`<ul>${block.items.map((item) => `<li>${escapeHtml(item)}</li>`).join('')}</ul>`);
        break;
      case 'table':
        body.push(
          `<table><thead><tr>${block.header.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead><tbody>` +
            block.rows.map((row) => `<tr>${row.map((cell) => `<td>${escapeHtml(cell)}</td>`).join('')}</tr>`).join('') +
            `</tbody></table>`,
        );
        break;
    }
  }
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<title>codegrep — ${TITLE}</title>`,
    `<style>${STYLE}</style>`,
    '</head>',
    '<body>',
    `<section class="codegrep-stage" id="downstream">`,
    ...body,
    '</section>',
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
