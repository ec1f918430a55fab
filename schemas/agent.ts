import { Bool, Field, Int32, List, Schema, Struct, Utf8 } from 'apache-arrow';
import { z } from 'zod';

/**
 * The agent retriever's contracts (docs/design.md "Tools"): the episode's inputs and limits, the two answer formats
 * (CodeGrep §3.2's `<answer>` JSON, CodeScout §3.2 / App. A Table 7's `localization_finish` call), the chat
 * messages of a trajectory, the episode result, and the Arrow schema of one predictions row. Pure zod and
 * apache-arrow: safe to import from workflow code. The loop that produces these lives in lib/agent/.
 */

export const AnswerFormatSchema = z.enum(['codegrep', 'codescout']);
export type AnswerFormat = z.infer<typeof AnswerFormatSchema>;

export const AgentInstanceSchema = z.object({
  instanceId: z.string().trim().min(1, 'instanceId must be a non-empty string'),
  problemStatement: z.string().trim().min(1, 'problemStatement must be a non-empty string'),
  /** `owner/name`, shown to the model. */
  repo: z.string().trim().min(1, 'repo must be a non-empty string'),
});
export type AgentInstance = z.infer<typeof AgentInstanceSchema>;

/** Limits of one episode; lib/agent/limits.ts fills in the papers' defaults for the fields left out. */
export const AgentLimitsSchema = z.object({
  /** Assistant turns in all, the answer turn included (CodeGrep: 4 = 3 exploration + 1 answer). */
  maxTurns: z.number().int().min(1, 'maxTurns must be at least 1').optional(),
  /** Tool calls executed per turn; further calls in the same turn are not run (CodeGrep: 8). */
  maxToolCallsPerTurn: z.number().int().min(1, 'maxToolCallsPerTurn must be at least 1').optional(),
  /** Completion tokens over the whole rollout; unset means no budget beyond the turn limit. */
  maxCompletionTokens: z.number().int().min(1, 'maxCompletionTokens must be at least 1').optional(),
});
export type AgentLimits = z.infer<typeof AgentLimitsSchema>;
export type ResolvedAgentLimits = Required<Pick<AgentLimits, 'maxTurns' | 'maxToolCallsPerTurn'>> &
  Pick<AgentLimits, 'maxCompletionTokens'>;

// ---------------------------------------------------------------------------------------------------------
// Answers

const answerPath = z.string().trim().min(1, 'must be a non-empty path');
const lineNumber = z.number().int('must be an integer').min(1, 'must be a line number >= 1');

/** `"path/to/file.py:10-20"` or `"path/to/file.py:10"`: the string form of a line range some models write. */
const LINE_RANGE_STRING = /^(.+):\s*(\d+)(?:\s*-\s*(\d+))?$/;

/** An inclusive, 1-based line range of one repository file, as every stage stores it. */
export const LineRangeSchema = z
  .object({ path: z.string().min(1), start: lineNumber, end: lineNumber })
  .refine((r) => r.end >= r.start, { message: 'end must be >= start', path: ['end'] });
export type LineRange = z.infer<typeof LineRangeSchema>;

/**
 * One element of `line_ranges` in a CodeGrep answer. The paper shows only `"line_ranges": [...]` (§3.2) and
 * scores ranges as (filename, start, end) triples (App. B), so the prompt asks for
 * `{"file": "a/b.py", "start": 10, "end": 20}`; `"path"` for `"file"` and the string `"a/b.py:10-20"`
 * (or `"a/b.py:10"`, one line) mean the same and are accepted too.
 */
export const AnswerLineRangeSchema = z
  .union(
    [
      z
        .object({ file: answerPath.optional(), path: answerPath.optional(), start: lineNumber, end: lineNumber })
        .refine((r) => (r.file ?? r.path) !== undefined, { message: 'needs a "file"', path: ['file'] }),
      z.string().regex(LINE_RANGE_STRING, 'a string line range must look like "path/to/file.py:10-20"'),
    ],
    { error: 'a line range must be {"file": "path", "start": n, "end": m} or "path:n-m"' },
  )
  .transform((value): LineRange => {
    if (typeof value === 'string') {
      const [, path, start, end] = LINE_RANGE_STRING.exec(value)!;
      return { path: path!.trim(), start: Number(start), end: Number(end ?? start) };
    }
    return { path: (value.file ?? value.path)!, start: value.start, end: value.end };
  })
  .refine((r) => r.end >= r.start, { message: 'end must be >= start' })
  .refine((r) => r.path !== '', { message: 'needs a non-empty file path' });

/**
 * The JSON inside CodeGrep's `<answer>…</answer>` (§3.2): `{"files": [...], "line_ranges": [...]}`.
 * `files` is required; `line_ranges` may be left out or null (v3 does not score it). Other keys are ignored.
 */
export const CodeGrepAnswerPayloadSchema = z.object(
  {
    files: z.array(answerPath, { error: 'files must be a list of path strings' }),
    line_ranges: z.array(AnswerLineRangeSchema, { error: 'line_ranges must be a list' }).nullish(),
  },
  { error: 'the answer must be a JSON object {"files": [...], "line_ranges": [...]}' },
);

export const CodeGrepAnswerSchema = z.object({
  /** Repository-relative, normalised, in the model's order. */
  files: z.array(z.string().min(1)),
  lineRanges: z.array(LineRangeSchema),
});
export type CodeGrepAnswer = z.infer<typeof CodeGrepAnswerSchema>;

export const LOCALIZATION_FINISH_TOOL_NAME = 'localization_finish';

/**
 * `localization_finish` arguments exactly as CodeScout App. A Table 7 types them:
 * `locations: List[Dict[str, Optional[str]]]` with `file` required and `class_name`, `function_name` optional.
 * This plain form is what the model is shown as the tool's JSON schema.
 */
export const LocalizationFinishParamsSchema = z.object({
  locations: z
    .array(
      z.object({
        file: z.string().describe('Repository-relative path of a file that must be changed, e.g. "src/pkg/module.py".'),
        class_name: z
          .string()
          .nullable()
          .optional()
          .describe('Class to change in that file; omit (or null) for a top-level function or the file as a whole.'),
        function_name: z
          .string()
          .nullable()
          .optional()
          .describe('Function or method to change; a method of class_name when both are given. Omit (or null) for none.'),
      }),
    )
    .describe('Every location that must be changed to resolve the issue, most important first.'),
});

/** An empty or whitespace-only name means "none", as null does. */
const optionalName = z
  .string({ error: 'must be a string or null' })
  .nullish()
  .transform((v) => (v === null || v === undefined || v.trim() === '' ? undefined : v.trim()));

export const FinishLocationSchema = z.object({
  file: z.string().min(1),
  class_name: z.string().min(1).optional(),
  function_name: z.string().min(1).optional(),
});
export type FinishLocation = z.infer<typeof FinishLocationSchema>;

/** `localization_finish` arguments as validated: unknown keys dropped, null / empty names made absent. */
export const LocalizationFinishArgsSchema = z.object({
  locations: z.array(z.object({ file: answerPath, class_name: optionalName, function_name: optionalName }), {
    error: 'locations must be a list of {file, class_name?, function_name?} objects',
  }),
});

export const CodeScoutAnswerSchema = z.object({ locations: z.array(FinishLocationSchema) });
export type CodeScoutAnswer = z.infer<typeof CodeScoutAnswerSchema>;

export const AgentAnswerSchema = z.union([CodeGrepAnswerSchema, CodeScoutAnswerSchema]);
export type AgentAnswer = z.infer<typeof AgentAnswerSchema>;

// ---------------------------------------------------------------------------------------------------------
// Chat messages (the OpenAI Chat Completions shape, which the Qwen3 chat template also renders)

export const WireToolCallSchema = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});
export type WireToolCall = z.infer<typeof WireToolCallSchema>;

export const SystemMessageSchema = z.object({ role: z.literal('system'), content: z.string() });
export const UserMessageSchema = z.object({ role: z.literal('user'), content: z.string() });
export const AssistantMessageSchema = z.object({
  role: z.literal('assistant'),
  /** Visible text: `<think>` and `<tool_call>` blocks removed. */
  content: z.string(),
  /** The `<think>` text (or the server's reasoning_content), when there was any. */
  reasoning_content: z.string().optional(),
  tool_calls: z.array(WireToolCallSchema).optional(),
});
export const ToolMessageSchema = z.object({
  role: z.literal('tool'),
  content: z.string(),
  tool_call_id: z.string(),
  name: z.string().optional(),
});
export const ChatMessageSchema = z.discriminatedUnion('role', [
  SystemMessageSchema,
  UserMessageSchema,
  AssistantMessageSchema,
  ToolMessageSchema,
]);
export type SystemMessage = z.infer<typeof SystemMessageSchema>;
export type UserMessage = z.infer<typeof UserMessageSchema>;
export type AssistantMessage = z.infer<typeof AssistantMessageSchema>;
export type ToolMessage = z.infer<typeof ToolMessageSchema>;
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

// ---------------------------------------------------------------------------------------------------------
// Episode result

/**
 * Why a rollout ended (CodeGrep App. A.1: "when the model produces an answer, when no tool call is
 * generated, when the completion budget is exhausted, or after the configured maximum of four turns").
 * `invalid_answer`: the model answered, but outside the schema (the reward is then 0).
 */
export const EndReasonSchema = z.enum(['answer', 'invalid_answer', 'no_tool_call', 'budget', 'turn_limit']);
export type EndReason = z.infer<typeof EndReasonSchema>;

const count = z.number().int().nonnegative();

export const EpisodeResultSchema = z.object({
  instanceId: z.string().min(1),
  answerFormat: AnswerFormatSchema,
  /** The parsed answer; null when there was none or it was invalid (then answerValid is false). */
  answer: AgentAnswerSchema.nullable(),
  answerValid: z.boolean(),
  /** Why an attempted answer was rejected; absent when it was valid or never given. */
  answerError: z.string().optional(),
  /** T: assistant turns, the answer turn included. */
  turns: count,
  /** C_total: tool calls executed (error observations included; calls beyond the per-turn limit and calls in a turn that ended the rollout are not). */
  toolCalls: count,
  /** Executed tool calls of each turn; length = turns. */
  toolCallsPerTurn: z.array(count),
  /** Calls the model made beyond the per-turn limit, which were not run. */
  toolCallsDropped: count,
  /** Executed calls whose observation was an error (bad arguments, unknown tool, tool failure). */
  toolErrors: count,
  /** How many times `localization_finish` was called (CodeScout's reward needs exactly 1). */
  finishCalls: count,
  /** Sum of prompt tokens over the turns' requests, as reported by the caller (server `usage`). */
  promptTokens: count,
  completionTokens: count,
  endReason: EndReasonSchema,
  trajectory: z.array(ChatMessageSchema),
});
export type EpisodeResult = z.infer<typeof EpisodeResultSchema>;

// ---------------------------------------------------------------------------------------------------------
// Predictions row (Parquet, written by the evaluation stage)

export const AGENT_PREDICTIONS_SCHEMA_NAME = 'agent.predictions';
export const AGENT_PREDICTIONS_SCHEMA_VERSION = 1;

/**
 * One instance's agent prediction. `files` is the answer's file list (CodeGrep) or the distinct files of the
 * finish call's locations (CodeScout), so file-level metrics read one column for both formats. `locations`
 * keeps Table 7's key names so it feeds lib/metrics' `locationsToSets` unchanged. Parquet gives optional
 * values back as null, hence `nullish`.
 */
export const AgentPredictionRowSchema = z.object({
  instanceId: z.string().min(1),
  retriever: z.string().min(1),
  answerFormat: AnswerFormatSchema,
  files: z.array(z.string()),
  lineRanges: z.array(LineRangeSchema),
  locations: z.array(z.object({ file: z.string(), class_name: z.string().nullish(), function_name: z.string().nullish() })),
  turns: count,
  toolCalls: count,
  finishCalls: count,
  promptTokens: count,
  completionTokens: count,
  answerValid: z.boolean(),
  answerError: z.string().nullish(),
  endReason: EndReasonSchema,
});
export type AgentPredictionRow = z.infer<typeof AgentPredictionRowSchema>;

const utf8List = () => new List(new Field('item', new Utf8(), false));
const structList = (fields: Field[]) => new List(new Field('item', new Struct(fields), false));

export const agentPredictionsArrowSchema = new Schema([
  new Field('instanceId', new Utf8(), false),
  new Field('retriever', new Utf8(), false),
  new Field('answerFormat', new Utf8(), false),
  new Field('files', utf8List(), false),
  new Field(
    'lineRanges',
    structList([new Field('path', new Utf8(), false), new Field('start', new Int32(), false), new Field('end', new Int32(), false)]),
    false,
  ),
  new Field(
    'locations',
    structList([
      new Field('file', new Utf8(), false),
      new Field('class_name', new Utf8(), true),
      new Field('function_name', new Utf8(), true),
    ]),
    false,
  ),
  new Field('turns', new Int32(), false),
  new Field('toolCalls', new Int32(), false),
  new Field('finishCalls', new Int32(), false),
  new Field('promptTokens', new Int32(), false),
  new Field('completionTokens', new Int32(), false),
  new Field('answerValid', new Bool(), false),
  new Field('answerError', new Utf8(), true),
  new Field('endReason', new Utf8(), false),
]);
