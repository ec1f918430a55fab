import { describe, expect, it } from 'vitest';
import type { ReportBlock } from './report';
import { renderDownstreamHtml, renderDownstreamMarkdown } from './report-render';

const blocks: ReportBlock[] = [
  { kind: 'heading', text: 'Errors' },
  { kind: 'paragraph', text: 'a <b> & "quoted" \'name\'' },
  { kind: 'table', header: ['Config', 'Resolve'], rows: [['a | b', 'line\nbreak']] },
  { kind: 'list', items: ['one\ntwo'] },
];

describe('downstream report rendering', () => {
  it('renders one list of blocks as Markdown with safe table cells', () => {
    expect(renderDownstreamMarkdown(blocks)).toBe(
      [
        '# Downstream injection',
        '',
        '## Errors',
        '',
        'a <b> & "quoted" \'name\'',
        '',
        '| Config | Resolve |',
        '| --- | --- |',
        '| a \\| b | line break |',
        '',
        '- one two',
        '',
      ].join('\n'),
    );
  });

  it('renders the same blocks as a self-contained HTML section, text escaped (quotes too)', () => {
    const html = renderDownstreamHtml(blocks);
    expect(html).toContain('<section class="codegrep-stage" id="downstream">');
    expect(html).toContain('<p>a &lt;b&gt; &amp; &quot;quoted&quot; &#39;name&#39;</p>');
    expect(html).toContain('<td>a | b</td>');
    expect(html).not.toMatch(/<script|https?:\/\//);
  });
});
