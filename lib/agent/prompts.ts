import type { AgentInstance, AnswerFormat, ResolvedAgentLimits } from '../../schemas/agent';
import { LOCALIZATION_FINISH_TOOL_NAME } from '../../schemas/agent';
import type { ToolName } from '../../schemas/tools';

/**
 * What the model is told. Neither paper prints its prompts in full (CodeScout's are figures), so these are
 * written from what they state: the issue and the repository (CodeScout §3.1 tells the agent where the code
 * is), the read-only tools, the per-turn parallel-call budget and the turn limit (CodeGrep §3.2, App. A.1),
 * an explicit request for parallel calls (CodeScout §3.3), the answer schema (CodeGrep §3.2; CodeScout
 * App. A Table 7), and a reminder before the last turn (CodeScout §4.3, after RepoNavigator).
 */

const TOOL_SUMMARIES: Record<ToolName, string> = {
  grep: 'grep: search file contents with a regular expression',
  glob: 'glob: list files whose path matches a pattern',
  read: 'read: read a file, or a line range of it',
  terminal: 'terminal: run a read-only search command line (rg, grep, find, ls, cat, head, tail, sed -n, wc)',
};

const CODEGREP_ANSWER_EXAMPLE =
  '<answer>{"files": ["path/to/file.py", "path/to/other.py"], "line_ranges": [{"file": "path/to/file.py", "start": 120, "end": 145}]}</answer>';

function answerInstructions(format: AnswerFormat): string {
  if (format === 'codegrep') {
    return [
      'When you know the answer, reply with exactly one answer block and no tool calls:',
      CODEGREP_ANSWER_EXAMPLE,
      '- "files": repository-relative paths of the files that must be read or changed to resolve the issue, most relevant first.',
      '- "line_ranges": where in those files the change belongs, as {"file": path, "start": first line, "end": last line} (1-based, inclusive); may be empty.',
      'Precision matters more than recall: every wrong file costs more than a missing one.',
    ].join('\n');
  }
  return [
    `When you know the answer, call ${LOCALIZATION_FINISH_TOOL_NAME} exactly once, with no other tool call in that turn.`,
    'Its "locations" list every place that must be changed: {"file": path} for a file, with "class_name" for a class,',
    'with "function_name" for a function, or both for a method of a class. Paths are repository-relative.',
    'Precision matters more than recall: every wrong location costs more than a missing one.',
  ].join('\n');
}

export function systemPrompt(format: AnswerFormat, tools: readonly ToolName[], limits: ResolvedAgentLimits): string {
  const { maxTurns, maxToolCallsPerTurn } = limits;
  const exploration = maxTurns - 1;
  const turnRule =
    exploration > 0
      ? `You have at most ${maxTurns} turns: ${exploration} exploration turn${exploration === 1 ? '' : 's'} and 1 final answer turn.`
      : 'You have a single turn: answer in it.';
  return [
    'You are a code search agent. Given a GitHub issue and the repository checked out at the commit it was reported',
    'against, you find the code a developer must change to resolve the issue. You do not fix the issue.',
    '',
    'Tools (read-only; every path is relative to the repository root):',
    ...tools.map((tool) => `- ${TOOL_SUMMARIES[tool]}`),
    '',
    'Rules:',
    `- ${turnRule}`,
    `- In each exploration turn, make several complementary tool calls at once (up to ${maxToolCallsPerTurn}); they run in parallel.`,
    `  Calls beyond ${maxToolCallsPerTurn} in one turn are not run.`,
    '- A reply with neither a tool call nor an answer ends the episode without an answer.',
    '',
    answerInstructions(format),
  ].join('\n');
}

export function userPrompt(instance: AgentInstance): string {
  return [
    `Repository: ${instance.repo}`,
    '',
    '<issue>',
    instance.problemStatement.trim(),
    '</issue>',
    '',
    'Find the code that must be changed to resolve this issue.',
  ].join('\n');
}

/** Sent with the observations of the last exploration turn (CodeScout §4.3's reminder). */
export function lastTurnReminder(format: AnswerFormat, turn: number, maxTurns: number): string {
  const head = `That was turn ${turn} of ${maxTurns}. Your next turn is the last one:`;
  return format === 'codegrep'
    ? `${head} tool calls will not be run, you must answer. Reply now with your final answer block:\n${CODEGREP_ANSWER_EXAMPLE}`
    : `${head} other tools will not be run, you must answer. Call ${LOCALIZATION_FINISH_TOOL_NAME} now, exactly once.`;
}

/** The observation for a call beyond the per-turn limit. */
export function droppedCallNotice(position: number, callsInTurn: number, maxToolCallsPerTurn: number): string {
  return `Not run: at most ${maxToolCallsPerTurn} tool calls are executed per turn, and this was call ${position} of ${callsInTurn} in this turn.`;
}
