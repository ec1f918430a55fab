/**
 * Reading the judge's reply (CodeGrep §3.4 stage 2, App. A.2): "we adopt a conservative bias treating any
 * non-explicit-NOT_RELEVANT output as RELEVANT". A file is dropped only when the reply says NOT_RELEVANT
 * without contradiction; everything unclear is DEFAULTED, which downstream stages keep like RELEVANT but which
 * stays countable.
 *
 * Rules, in order (each pinned by judge-verdict.test.ts):
 *  1. Thinking is not the answer: text inside <think>…</think> is removed, as is everything before a stray
 *     closing </think> (servers that strip the opening tag) and everything after an unclosed <think>
 *     (a reply cut off mid-thought).
 *  2. Nothing left → DEFAULTED ('empty').
 *  3. Label lines decide first. A line is a label line when, after dropping markdown decoration (* ` # > " “ ”
 *     [ ] list bullets) and trailing punctuation, it is just a label, optionally after a short prefix
 *     ("Verdict:", "Answer:", "Final answer:", "Label:", "Classification:", "Judgement:", "Decision:",
 *     "Output:", "Result:"). Labels: RELEVANT, or NOT_RELEVANT / NOT RELEVANT / not-relevant / NOTRELEVANT in
 *     any case. All label lines agree → that verdict ('label-line'); they disagree → DEFAULTED ('conflicting').
 *  4. Otherwise the upper-case label tokens in running text (RELEVANT, NOT_RELEVANT, NOT RELEVANT,
 *     NOT-RELEVANT) decide: all agree → that verdict ('label-token'); both kinds → DEFAULTED ('conflicting').
 *  5. Otherwise prose, case-insensitive: "not relevant" (also not_relevant, not-relevant) counts as
 *     NOT_RELEVANT, a plain "relevant" as RELEVANT. A "relevant" under another negation ("isn't relevant",
 *     "not really relevant", "no longer relevant", "non-relevant", "hardly relevant"; up to two words between) is not explicit either
 *     way → DEFAULTED ('negated-prose'). All mentions agree → that verdict ('prose'); both kinds → DEFAULTED
 *     ('conflicting').
 *  6. No mention at all ("irrelevant", "yes", garbage) → DEFAULTED ('no-verdict').
 */

export type ParsedVerdictLabel = 'RELEVANT' | 'NOT_RELEVANT' | 'DEFAULTED';

export type VerdictRule = 'label-line' | 'label-token' | 'prose' | 'empty' | 'conflicting' | 'negated-prose' | 'no-verdict';

export interface ParsedVerdict {
  verdict: ParsedVerdictLabel;
  rule: VerdictRule;
  /** The reply with thinking removed and surrounding whitespace trimmed: what the rules read. */
  answer: string;
}

/** Rule 1. */
export function stripThinking(reply: string): string {
  let text = reply.replace(/<think(?:ing)?>[\s\S]*?<\/think(?:ing)?>/gi, '');
  const strayClose = text.search(/<\/think(?:ing)?>(?![\s\S]*<\/think(?:ing)?>)/i);
  if (strayClose >= 0) text = text.slice(text.indexOf('>', strayClose) + 1);
  const unclosedOpen = text.search(/<think(?:ing)?>/i);
  if (unclosedOpen >= 0) text = text.slice(0, unclosedOpen);
  return text.trim();
}

const NOT_RELEVANT_SPELLING = String.raw`not[\s_-]*relevant`;

const LABEL_LINE = new RegExp(
  String.raw`^(?:(?:final\s+)?(?:verdict|answer|label|classification|judge?ment|decision|output|result)\s*[:=\-–—]\s*)?` +
    String.raw`(${NOT_RELEVANT_SPELLING}|relevant)$`,
  'i',
);

function cleanLine(line: string): string {
  return line
    .replace(/[*`#>"“”[\]]/g, ' ')
    .replace(/^\s*(?:[-+•]|\d+[.)])\s+/, '')
    .replace(/\s+/g, ' ')
    .trim()
    .replace(/[\s.!:;,]+$/, '');
}

function labelOf(spelling: string): 'RELEVANT' | 'NOT_RELEVANT' {
  return /^not/i.test(spelling) ? 'NOT_RELEVANT' : 'RELEVANT';
}

function unanimous(labels: Array<'RELEVANT' | 'NOT_RELEVANT'>): 'RELEVANT' | 'NOT_RELEVANT' | 'mixed' {
  const distinct = new Set(labels);
  return distinct.size === 1 ? [...distinct][0]! : 'mixed';
}

/** A "relevant" whose nearest preceding words negate it, other than the canonical "not relevant" spelling. */
const NEGATION_BEFORE = /(?:\b(?:not|never|no|hardly|barely|scarcely|neither|nor|non|without)\b|n['’]t\b)[\s-]*(?:[\w'’]+\s+){0,2}$/i;

export function parseJudgeVerdict(reply: string | null | undefined): ParsedVerdict {
  const answer = stripThinking(reply ?? '');
  if (answer === '') return { verdict: 'DEFAULTED', rule: 'empty', answer };

  const labelLines: Array<'RELEVANT' | 'NOT_RELEVANT'> = [];
  for (const line of answer.split(/\r?\n/)) {
    const match = LABEL_LINE.exec(cleanLine(line));
    if (match) labelLines.push(labelOf(match[1]!));
  }
  if (labelLines.length > 0) {
    const label = unanimous(labelLines);
    return label === 'mixed' ? { verdict: 'DEFAULTED', rule: 'conflicting', answer } : { verdict: label, rule: 'label-line', answer };
  }

  // Case-sensitive: the upper-case spelling is the model using the label vocabulary, not writing prose.
  const tokens = [...answer.matchAll(/\bNOT[ _-]?RELEVANT\b|\bRELEVANT\b/g)].map((m) => labelOf(m[0]));
  if (tokens.length > 0) {
    const label = unanimous(tokens);
    return label === 'mixed' ? { verdict: 'DEFAULTED', rule: 'conflicting', answer } : { verdict: label, rule: 'label-token', answer };
  }

  const mentions: Array<'RELEVANT' | 'NOT_RELEVANT'> = [];
  let negated = false;
  for (const match of answer.matchAll(new RegExp(String.raw`\b${NOT_RELEVANT_SPELLING}\b|\brelevant\b`, 'gi'))) {
    const label = labelOf(match[0]);
    if (label === 'RELEVANT' && NEGATION_BEFORE.test(answer.slice(Math.max(0, match.index - 40), match.index))) {
      negated = true;
      continue;
    }
    mentions.push(label);
  }
  if (negated) return { verdict: 'DEFAULTED', rule: 'negated-prose', answer };
  if (mentions.length === 0) return { verdict: 'DEFAULTED', rule: 'no-verdict', answer };
  const label = unanimous(mentions);
  return label === 'mixed' ? { verdict: 'DEFAULTED', rule: 'conflicting', answer } : { verdict: label, rule: 'prose', answer };
}
