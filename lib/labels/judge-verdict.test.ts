import { describe, expect, it } from 'vitest';
import { parseJudgeVerdict, stripThinking, type ParsedVerdictLabel, type VerdictRule } from './judge-verdict';

// Each row: reply, expected verdict, expected rule. The paper's bias (§3.4 stage 2): only an explicit,
// uncontradicted NOT_RELEVANT drops a file; everything unclear is DEFAULTED (kept).
const table: Array<[string | null | undefined, ParsedVerdictLabel, VerdictRule]> = [
  // exact labels, any case, decoration and punctuation
  ['RELEVANT', 'RELEVANT', 'label-line'],
  ['NOT_RELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['  not_relevant \n', 'NOT_RELEVANT', 'label-line'],
  ['Relevant.', 'RELEVANT', 'label-line'],
  ['**NOT_RELEVANT**', 'NOT_RELEVANT', 'label-line'],
  ['`RELEVANT`', 'RELEVANT', 'label-line'],
  ['"NOT_RELEVANT"', 'NOT_RELEVANT', 'label-line'],
  ['NOT RELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['not-relevant!', 'NOT_RELEVANT', 'label-line'],
  ['NOTRELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['# RELEVANT', 'RELEVANT', 'label-line'],
  ['- NOT_RELEVANT', 'NOT_RELEVANT', 'label-line'],
  // a prefix on the label line
  ['Verdict: NOT_RELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['**Final answer:** RELEVANT', 'RELEVANT', 'label-line'],
  ['Answer - not relevant', 'NOT_RELEVANT', 'label-line'],
  // the label line beats prose around it, first or last
  ['The reasoning shows the relevant code lives elsewhere.\n\nVerdict: NOT_RELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['NOT_RELEVANT\nThe agent only found that the relevant code is in another module.', 'NOT_RELEVANT', 'label-line'],
  ['RELEVANT\n\nVerdict: RELEVANT', 'RELEVANT', 'label-line'],
  // label lines that disagree
  ['RELEVANT\nNOT_RELEVANT', 'DEFAULTED', 'conflicting'],
  // upper-case label tokens in running text
  ['I would classify this file as NOT_RELEVANT because it is a test of another feature.', 'NOT_RELEVANT', 'label-token'],
  ['The file defines the relevant queryset method, so: RELEVANT (it must change).', 'RELEVANT', 'label-token'],
  ['Hmm, RELEVANT or NOT_RELEVANT? Hard to say.', 'DEFAULTED', 'conflicting'],
  ['It is NOT RELEVANT to the fix.', 'NOT_RELEVANT', 'label-token'],
  // prose
  ['The file is not relevant to the issue.', 'NOT_RELEVANT', 'prose'],
  ['This file is relevant: it holds the bug.', 'RELEVANT', 'prose'],
  ["The file isn't relevant.", 'DEFAULTED', 'negated-prose'],
  ['It is not really relevant here.', 'DEFAULTED', 'negated-prose'],
  ['This is no longer relevant after the refactor.', 'DEFAULTED', 'negated-prose'],
  ['A non-relevant helper.', 'DEFAULTED', 'negated-prose'],
  ['It is relevant, although the other module is not relevant.', 'DEFAULTED', 'conflicting'],
  ['Notably relevant to the fix.', 'RELEVANT', 'prose'],
  // nothing explicit
  ['IRRELEVANT', 'DEFAULTED', 'no-verdict'],
  ['The file is irrelevant.', 'DEFAULTED', 'no-verdict'],
  ['Yes', 'DEFAULTED', 'no-verdict'],
  ['{"verdict": 1}', 'DEFAULTED', 'no-verdict'],
  ['\u0000\u00ff<html>', 'DEFAULTED', 'no-verdict'],
  ['', 'DEFAULTED', 'empty'],
  ['   \n\t', 'DEFAULTED', 'empty'],
  [null, 'DEFAULTED', 'empty'],
  [undefined, 'DEFAULTED', 'empty'],
  // thinking is not the answer
  ['<think>Is it relevant? Perhaps NOT_RELEVANT... no.</think>\nRELEVANT', 'RELEVANT', 'label-line'],
  ['<think>The file looks relevant at first.</think>NOT_RELEVANT', 'NOT_RELEVANT', 'label-line'],
  ['The model reasons that it is not relevant</think>\n\nRELEVANT', 'RELEVANT', 'label-line'],
  ['<think>It seems NOT_RELEVANT because the agent moved on and', 'DEFAULTED', 'empty'],
  ['<thinking>maybe</thinking> **NOT_RELEVANT**', 'NOT_RELEVANT', 'label-line'],
];

describe('parseJudgeVerdict', () => {
  it.each(table)('%j → %s (%s)', (reply, verdict, rule) => {
    const parsed = parseJudgeVerdict(reply);
    expect({ verdict: parsed.verdict, rule: parsed.rule }).toEqual({ verdict, rule });
  });

  it('never turns a reply without an explicit NOT_RELEVANT into NOT_RELEVANT (conservative default)', () => {
    for (const [reply, verdict] of table) {
      const explicit = /not[\s_-]*relevant/i.test(stripThinking(reply ?? ''));
      if (verdict === 'NOT_RELEVANT') expect(explicit).toBe(true);
    }
  });
});

describe('stripThinking', () => {
  it('removes closed blocks, text before a stray closing tag and text after an unclosed opening tag', () => {
    expect(stripThinking('<think>a</think> x <think>b</think> y')).toBe('x  y');
    expect(stripThinking('reasoning</think>answer')).toBe('answer');
    expect(stripThinking('answer <think>cut off')).toBe('answer');
    expect(stripThinking('<THINK>A</THINK>B')).toBe('B');
  });
});
