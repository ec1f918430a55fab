import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';

/**
 * The CATM stage-2 judge prompt (CodeGrep §3.4 stage 2, App. A.2): the judge sees the task description, the
 * file path and the agent's post-reasoning, and answers RELEVANT or NOT_RELEVANT. The paper names the inputs
 * and the two labels but does not print its prompt; the wording below is ours. Bump JUDGE_PROMPT_VERSION on
 * any change so cached judgements made with another wording are not reused.
 */
export const JUDGE_PROMPT_VERSION = 1;

/** The two labels the judge is asked for, spelled exactly as in the paper. */
export const JUDGE_LABELS = { relevant: 'RELEVANT', notRelevant: 'NOT_RELEVANT' } as const;

export interface JudgePromptInput {
  problemStatement: string;
  path: string;
  postReasoning: string;
}

export interface JudgePromptLimits {
  /** Longer problem statements keep their head (title and description come first). */
  maxProblemStatementChars: number;
  /** Longer post-reasoning keeps its head: the sentences written right after reading the file. */
  maxPostReasoningChars: number;
}

/** Keeps a prompt near 8k tokens at worst, inside the context of small local judges. */
export const DEFAULT_JUDGE_PROMPT_LIMITS: JudgePromptLimits = {
  maxProblemStatementChars: 12_000,
  maxPostReasoningChars: 12_000,
};

export const JUDGE_SYSTEM_PROMPT = [
  'You review the work of a software engineering agent that was resolving an issue in a code repository.',
  'The agent opened one file and then wrote down its reasoning. Decide whether that file was relevant to',
  'resolving the issue.',
  '',
  `Answer ${JUDGE_LABELS.relevant} if the file's contents informed the work: it holds code that must change, code the`,
  'fix calls or must stay consistent with, or tests, configuration or definitions the agent needed to',
  'understand the problem or its fix.',
  `Answer ${JUDGE_LABELS.notRelevant} if the read was a dead end: the file turned out to be unrelated, was opened by`,
  'mistake, or only confirmed that the answer lies elsewhere.',
  '',
  `Reply with exactly one word: ${JUDGE_LABELS.relevant} or ${JUDGE_LABELS.notRelevant}.`,
].join('\n');

function clip(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  return `${text.slice(0, maxChars)}\n[… ${text.length - maxChars} more characters cut]`;
}

export function buildJudgeMessages(
  input: JudgePromptInput,
  limits: JudgePromptLimits = DEFAULT_JUDGE_PROMPT_LIMITS,
): ChatCompletionMessageParam[] {
  const user = [
    '<task_description>',
    clip(input.problemStatement.trim(), limits.maxProblemStatementChars),
    '</task_description>',
    '',
    '<file_path>',
    input.path,
    '</file_path>',
    '',
    '<agent_reasoning_after_reading_the_file>',
    clip(input.postReasoning.trim(), limits.maxPostReasoningChars),
    '</agent_reasoning_after_reading_the_file>',
    '',
    `Was ${input.path} relevant to resolving the task? Reply with exactly one word: ${JUDGE_LABELS.relevant} or ${JUDGE_LABELS.notRelevant}.`,
  ].join('\n');
  return [
    { role: 'system', content: JUDGE_SYSTEM_PROMPT },
    { role: 'user', content: user },
  ];
}
