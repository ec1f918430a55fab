import { Bool, Field, Float64, Int32, Schema, Utf8 } from 'apache-arrow';
import { z } from 'zod';

/**
 * Downstream injection evaluation (SPEC §5 "Downstream injection"; CodeGrep §4.1, §4.3, §5.3, App. E;
 * CodeScout §6.1): the instance a frozen coding agent solves, the injection configurations, the
 * `str_replace_editor` arguments of the built-in agent, the harness outcomes, one run-result row
 * (Arrow/Parquet) and the Table 3 summary. Pure zod and apache-arrow: safe to import from workflow code. The
 * code that produces these lives in lib/downstream/ and lib/stats/.
 */

// ---------------------------------------------------------------------------------------------------------
// Instances

/**
 * SWE-bench stores the test lists as JSON-encoded strings (`"[\"tests/test_a.py::test_x\"]"`); exports that
 * decoded them hold arrays. Both are accepted; absent or null means no tests.
 */
const TestListSchema = z
  .union([z.array(z.string().min(1, 'a test name must be non-empty')), z.string(), z.null()], {
    error: 'must be a list of test names or a JSON string of one',
  })
  .optional()
  .transform((value, ctx): string[] => {
    if (value === undefined || value === null) return [];
    if (Array.isArray(value)) return value;
    if (value.trim() === '') return [];
    let decoded: unknown;
    try {
      decoded = JSON.parse(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'is a string but not a JSON list of test names' });
      return z.NEVER;
    }
    if (!Array.isArray(decoded) || decoded.some((t) => typeof t !== 'string' || t === '')) {
      ctx.addIssue({ code: 'custom', message: 'must decode to a list of non-empty test-name strings' });
      return z.NEVER;
    }
    return decoded as string[];
  });

/**
 * One issue for the downstream agent: the five columns of shared/data's SWE-bench files plus, when the source
 * has them, SWE-bench's test columns. `patch` (the gold patch) is needed only by the oracle configuration;
 * `test_patch`, `FAIL_TO_PASS` and `PASS_TO_PASS` only by the local harness. Unknown keys are ignored.
 */
export const DownstreamInstanceSchema = z.object({
  instance_id: z.string().trim().min(1, 'must be a non-empty string'),
  repo: z.string().regex(/^[^/\s]+\/[^/\s]+$/, 'expected "owner/name"'),
  base_commit: z.string().regex(/^[0-9a-f]{40}$/, 'expected a full 40-hex-digit commit id'),
  problem_statement: z.string(),
  patch: z.string().optional(),
  test_patch: z.string().nullish().transform((v) => (v === null || v === undefined || v.trim() === '' ? undefined : v)),
  FAIL_TO_PASS: TestListSchema,
  PASS_TO_PASS: TestListSchema,
});
export type DownstreamInstanceInput = z.input<typeof DownstreamInstanceSchema>;
export type DownstreamInstance = z.infer<typeof DownstreamInstanceSchema>;

// ---------------------------------------------------------------------------------------------------------
// Injection configurations

/**
 * What goes into the agent's prompt (CodeGrep §4.3 / App. E; CodeScout §6.1):
 * - `none`: the issue unchanged (the no-retrieval baseline);
 * - `oracle`: the files the gold patch changes;
 * - `predictions`: a retriever's files for the instance, in its order.
 * `k` keeps only the first k files; absent means all of them (App. E's K = 2 is BM25's own top-K, applied by
 * the retriever; setting k here cuts again).
 */
export const InjectionSourceSchema = z.enum(['none', 'oracle', 'predictions']);
export type InjectionSource = z.infer<typeof InjectionSourceSchema>;

export const InjectionConfigurationSchema = z.object({
  name: z
    .string()
    .trim()
    .min(1, 'a configuration needs a name (the row label of Table 3, e.g. "baseline", "bm25-top2")'),
  source: InjectionSourceSchema,
  k: z.number().int().min(1, 'k must be at least 1 (leave it out to inject every file)').optional(),
});
export type InjectionConfiguration = z.infer<typeof InjectionConfigurationSchema>;

// ---------------------------------------------------------------------------------------------------------
// The built-in agent's editor tool (SWE-agent / OpenHands `str_replace_editor`)

export const EDITOR_TOOL_NAME = 'str_replace_editor';
export const SUBMIT_TOOL_NAME = 'submit';

export const EditorCommandSchema = z.enum(['view', 'create', 'str_replace', 'insert']);
export type EditorCommand = z.infer<typeof EditorCommandSchema>;

export const EditorArgsSchema = z
  .object({
    command: EditorCommandSchema.describe('The command to run: view, create, str_replace or insert.'),
    path: z
      .string()
      .min(1)
      .max(4096)
      .describe('Path of the file or directory, relative to the repository root (e.g. "pkg/module.py").'),
    file_text: z.string().optional().describe('`create`: the content of the new file.'),
    old_str: z
      .string()
      .optional()
      .describe('`str_replace`: the exact text to replace; it must occur exactly once in the file, whitespace included.'),
    new_str: z
      .string()
      .optional()
      .describe('`str_replace`: the replacement (default: empty, i.e. delete old_str). `insert`: the text to insert.'),
    insert_line: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('`insert`: new_str is inserted AFTER this line number (0 inserts at the top of the file).'),
    view_range: z
      .array(z.number().int())
      .length(2)
      .optional()
      .describe('`view` of a file: [start, end] line numbers, 1-based and inclusive; end -1 means to the end of the file.'),
  })
  .strict();
export type EditorArgs = z.infer<typeof EditorArgsSchema>;

export const SubmitArgsSchema = z
  .object({
    message: z.string().optional().describe('A short summary of the change (optional).'),
  })
  .strict();

// ---------------------------------------------------------------------------------------------------------
// Agent and harness outcomes

/**
 * Why a downstream agent run ended.
 * - `submitted`: the agent called its finish tool (`submit`; OpenHands' `finish`).
 * - `no_tool_call`: a reply without a tool call ended the run (the usual chat-agent stop).
 * - `length`: the last reply was cut by the completion-token limit and held no tool call.
 * - `round_limit`: the round budget (CodeGrep §4.1: 100) ran out.
 * - `context_limit`: the endpoint refused the request because the conversation outgrew the context.
 * - `llm_error`: the endpoint failed for good (auth, retries exhausted, a refused request).
 * - `timeout`: an outside agent ran past its time limit and was killed.
 * - `agent_error`: an outside agent failed (non-zero exit, no output, an error in its output).
 * - `stopped`: an outside agent ended without saying why.
 */
export const DownstreamEndReasonSchema = z.enum([
  'submitted',
  'no_tool_call',
  'length',
  'round_limit',
  'context_limit',
  'llm_error',
  'timeout',
  'agent_error',
  'stopped',
]);
export type DownstreamEndReason = z.infer<typeof DownstreamEndReasonSchema>;

/**
 * What a harness says about one patch. `patch_failed`: the patch does not apply at the base commit;
 * `timeout`: the tests ran past the limit and were killed; `error`: the evaluation itself could not be done
 * (missing interpreter, a broken instance, the harness crashed) — never the model's fault.
 */
export const HarnessOutcomeSchema = z.enum(['resolved', 'unresolved', 'patch_failed', 'timeout', 'error']);
export type HarnessOutcome = z.infer<typeof HarnessOutcomeSchema>;

export const TestStatusSchema = z.object({ test: z.string(), passed: z.boolean() });
export type TestStatus = z.infer<typeof TestStatusSchema>;

export const HarnessResultSchema = z.object({
  resolved: z.boolean(),
  outcome: HarnessOutcomeSchema,
  /** What happened, for a human: commands, their output tails, the reason for the outcome. */
  log: z.string(),
  failToPass: z.array(TestStatusSchema),
  passToPass: z.array(TestStatusSchema),
});
export type HarnessResult = z.infer<typeof HarnessResultSchema>;

// ---------------------------------------------------------------------------------------------------------
// Run-result rows (Parquet)

export const DOWNSTREAM_RUNS_SCHEMA_NAME = 'downstream.runs';
export const DOWNSTREAM_RUNS_SCHEMA_VERSION = 1;

const count = z.number().int().nonnegative();

/**
 * One (configuration, instance) run: the agent's cost and the harness's verdict. `outcome` is the harness's,
 * or `error` when the run failed before the harness could judge it (then `error` says why). `rounds` counts
 * model calls; tokens are summed over them (input = prompt tokens, output = completion tokens).
 */
export const DownstreamRunRowSchema = z.object({
  configuration: z.string().min(1),
  instanceId: z.string().min(1),
  resolved: z.boolean(),
  outcome: HarnessOutcomeSchema,
  rounds: count,
  inputTokens: count,
  outputTokens: count,
  patchBytes: count,
  endReason: DownstreamEndReasonSchema,
  error: z.string().nullable(),
});
export type DownstreamRunRow = z.infer<typeof DownstreamRunRowSchema>;

export const downstreamRunsArrowSchema = new Schema(
  [
    new Field('configuration', new Utf8(), false),
    new Field('instanceId', new Utf8(), false),
    new Field('resolved', new Bool(), false),
    new Field('outcome', new Utf8(), false),
    new Field('rounds', new Int32(), false),
    // Tokens and bytes as Float64: exact up to 2^53 and plain JS numbers when read back (Int64 would be BigInt).
    new Field('inputTokens', new Float64(), false),
    new Field('outputTokens', new Float64(), false),
    new Field('patchBytes', new Float64(), false),
    new Field('endReason', new Utf8(), false),
    new Field('error', new Utf8(), true),
  ],
  new Map([
    ['schemaName', DOWNSTREAM_RUNS_SCHEMA_NAME],
    ['schemaVersion', String(DOWNSTREAM_RUNS_SCHEMA_VERSION)],
  ]),
);

// ---------------------------------------------------------------------------------------------------------
// Table 3 summary (JSON)

export const IntervalSchema = z.object({
  low: z.number(),
  high: z.number(),
  confidence: z.number(),
  resamples: z.number().int(),
  seed: z.number().int(),
});
export type Interval = z.infer<typeof IntervalSchema>;

/** A mean with its bootstrap interval; both null when the set it is taken over is empty. */
export const MeanWithIntervalSchema = z.object({
  n: count,
  mean: z.number().nullable(),
  interval: IntervalSchema.nullable(),
});
export type MeanWithInterval = z.infer<typeof MeanWithIntervalSchema>;

/** Baseline vs configuration on the instances both resolve (CodeGrep §5.3). */
export const PairedEfficiencySchema = z.object({
  n: count,
  baseline: z.number().nullable(),
  value: z.number().nullable(),
  /** value / baseline − 1 (−0.09 is "−9%"); null when undefined. */
  relativeChange: z.number().nullable(),
  /** Bootstrap interval of the mean per-instance difference (value − baseline) on the paired set. */
  differenceInterval: IntervalSchema.nullable(),
});
export type PairedEfficiency = z.infer<typeof PairedEfficiencySchema>;

export const BaselineComparisonSchema = z.object({
  baseline: z.string(),
  /** Instances run under both configurations (every paired statistic is over these). */
  common: count,
  /** Resolve-rate difference (configuration − baseline) on the common instances, as a fraction. */
  resolveRateDifference: z.number().nullable(),
  resolveRateDifferenceInterval: IntervalSchema.nullable(),
  mcnemar: z.object({
    /** Resolved by the baseline only. */
    b: count,
    /** Resolved by this configuration only. */
    c: count,
    pValue: z.number(),
  }),
  /** Instances both resolve. */
  bothResolved: count,
  pairedRounds: PairedEfficiencySchema,
  pairedTokens: PairedEfficiencySchema,
});
export type BaselineComparison = z.infer<typeof BaselineComparisonSchema>;

/** One row of CodeGrep Table 3 (Resolve, Resolved r., Resolved tok., Unresolved r.) plus intervals. */
export const DownstreamTableRowSchema = z.object({
  configuration: z.string(),
  instances: count,
  resolved: count,
  /** Rows whose outcome was `error` (counted as not resolved). */
  errors: count,
  resolveRate: z.number().nullable(),
  resolveRateInterval: IntervalSchema.nullable(),
  resolvedRounds: MeanWithIntervalSchema,
  /** Input + output tokens per resolved run. */
  resolvedTokens: MeanWithIntervalSchema,
  unresolvedRounds: MeanWithIntervalSchema,
  /** Null for the baseline row itself. */
  vsBaseline: BaselineComparisonSchema.nullable(),
});
export type DownstreamTableRow = z.infer<typeof DownstreamTableRowSchema>;

export const DownstreamTableSchema = z.object({
  baseline: z.string(),
  rows: z.array(DownstreamTableRowSchema),
});
export type DownstreamTable = z.infer<typeof DownstreamTableSchema>;
