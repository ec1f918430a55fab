import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildJudgeMessages, JUDGE_SYSTEM_PROMPT } from './judge-prompt';

const dataDir = path.resolve(import.meta.dirname, '../../../shared/data');
const instance = JSON.parse(readFileSync(path.join(dataDir, 'swebench_verified.jsonl'), 'utf8').split('\n')[0]!) as {
  instance_id: string;
  problem_statement: string;
};

describe('buildJudgeMessages', () => {
  it('shows the task description, the file path and the post-reasoning, and asks for one of the two labels', () => {
    const messages = buildJudgeMessages({
      problemStatement: instance.problem_statement,
      path: 'astropy/modeling/separable.py',
      postReasoning: 'The _cstack function builds the right-hand matrix with ones instead of the nested matrix.',
    });
    expect(messages.map((m) => m.role)).toEqual(['system', 'user']);
    expect(messages[0]?.content).toBe(JUDGE_SYSTEM_PROMPT);
    expect(JUDGE_SYSTEM_PROMPT).toContain('Reply with exactly one word: RELEVANT or NOT_RELEVANT.');
    const user = String(messages[1]?.content);
    expect(user).toContain(`<task_description>\n${instance.problem_statement.trim()}\n</task_description>`);
    expect(user).toContain('<file_path>\nastropy/modeling/separable.py\n</file_path>');
    expect(user).toContain('builds the right-hand matrix with ones');
    expect(user.trimEnd().endsWith('Reply with exactly one word: RELEVANT or NOT_RELEVANT.')).toBe(true);
  });

  it('keeps the head of an over-long problem statement or reasoning and says how much was cut', () => {
    const messages = buildJudgeMessages(
      { problemStatement: 'P'.repeat(50), path: 'a.py', postReasoning: `start ${'r'.repeat(100)}` },
      { maxProblemStatementChars: 10, maxPostReasoningChars: 20 },
    );
    const user = String(messages[1]?.content);
    expect(user).toContain(`${'P'.repeat(10)}\n[… 40 more characters cut]`);
    expect(user).toContain(`start ${'r'.repeat(14)}\n[… 86 more characters cut]`);
  });
});
