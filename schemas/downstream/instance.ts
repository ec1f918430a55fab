import { z } from 'zod';

// The SWE-bench-style instance a frozen coding agent solves (docs/design.md "Downstream injection"; CodeGrep §4.3).

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
  test_patch: z
    .string()
    .nullish()
    .transform((v) => (v === null || v === undefined || v.trim() === '' ? undefined : v)),
  FAIL_TO_PASS: TestListSchema,
  PASS_TO_PASS: TestListSchema,
});
export type DownstreamInstanceInput = z.input<typeof DownstreamInstanceSchema>;
export type DownstreamInstance = z.infer<typeof DownstreamInstanceSchema>;
