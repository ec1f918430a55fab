import { z } from 'zod';
import {
  LOCALIZATION_FINISH_TOOL_NAME,
  LocalizationFinishArgsSchema,
  LocalizationFinishParamsSchema,
  type CodeScoutAnswer,
} from '../../schemas/agent';
import { normalizeRepoPath } from '../paths/normalize';
import type { ParsedAnswer } from './answer-codegrep';
import type { AnswerReply, ReplyAnswer } from './answer-format';
import { describeIssues } from './describe-issues';

/**
 * CodeScout's answer (§3.2, App. A Table 7): the agent ends by calling `localization_finish` with
 * `locations: [{file, class_name?, function_name?}]`. The call must happen exactly once (§3.3: otherwise the
 * reward is 0), so the count of calls is kept beside the parsed answer.
 */

/** The tool definition shown to the model. */
export function localizationFinishToolDefinition() {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(LocalizationFinishParamsSchema, { io: 'input' }) as Record<string, unknown>;
  return {
    type: 'function' as const,
    function: {
      name: LOCALIZATION_FINISH_TOOL_NAME,
      description:
        'Submit your final answer and end the episode: the files, classes and functions that must be changed to ' +
        'resolve the issue. Call it exactly once, alone, when you are done exploring.',
      parameters,
    },
  };
}

/** Validates one `localization_finish` call's JSON arguments. Every failure is a message, never an exception. */
export function parseLocalizationFinish(rawArguments: string, worktreeRoot: string): ParsedAnswer<CodeScoutAnswer> {
  let value: unknown;
  try {
    value = rawArguments.trim() === '' ? {} : JSON.parse(rawArguments);
  } catch (error) {
    return {
      ok: false,
      error: `${LOCALIZATION_FINISH_TOOL_NAME} arguments are not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const parsed = LocalizationFinishArgsSchema.safeParse(value);
  if (!parsed.success) {
    return { ok: false, error: `${LOCALIZATION_FINISH_TOOL_NAME} arguments do not match the schema: ${describeIssues(parsed.error)}` };
  }
  const problems: string[] = [];
  const locations = parsed.data.locations.map((location, i) => {
    const file = normalizeRepoPath(location.file, { root: worktreeRoot });
    if (file === '') problems.push(`locations[${i}].file: ${JSON.stringify(location.file)} is not a file path`);
    return {
      file,
      ...(location.class_name === undefined ? {} : { class_name: location.class_name }),
      ...(location.function_name === undefined ? {} : { function_name: location.function_name }),
    };
  });
  if (problems.length > 0)
    return { ok: false, error: `${LOCALIZATION_FINISH_TOOL_NAME} arguments do not match the schema: ${problems.join('; ')}` };
  return { ok: true, answer: { locations } };
}

/**
 * A CodeScout reply answers by calling `localization_finish`: exactly once (§3.3), or the answer is invalid. A
 * call whose block could not be read is a spent budget when generation was cut, an invalid answer otherwise.
 */
export function readCodeScoutReply(reply: AnswerReply, worktreeRoot: string): ReplyAnswer {
  const finishes = reply.calls.filter((c) => c.name === LOCALIZATION_FINISH_TOOL_NAME);
  const finishCalls = finishes.length;
  if (finishCalls === 0) return { finishCalls };
  if (finishCalls > 1) {
    const error = `${LOCALIZATION_FINISH_TOOL_NAME} was called ${finishCalls} times; it must be called exactly once`;
    return { finishCalls, end: { reason: 'invalid_answer', parsed: { ok: false, error } } };
  }
  const finish = finishes[0]!;
  if (finish.malformed !== undefined) {
    if (reply.truncated) return { finishCalls, end: { reason: 'budget' } };
    return { finishCalls, end: { reason: 'invalid_answer', parsed: { ok: false, error: finish.malformed } } };
  }
  const parsed = parseLocalizationFinish(finish.arguments, worktreeRoot);
  return { finishCalls, end: { reason: parsed.ok ? 'answer' : 'invalid_answer', parsed } };
}
