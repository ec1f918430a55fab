import type { DownstreamInstance, HarnessResult } from '../../../schemas/downstream';

/**
 * Decides whether a patch resolves an instance (SWE-bench's rule: every FAIL_TO_PASS test passes and every
 * PASS_TO_PASS test still passes). Implementations never throw for an outcome — a patch that does not apply,
 * a test run past its time, a missing interpreter are all results — only for cancellation.
 */
export interface Harness {
  readonly name: string;
  evaluate(instance: DownstreamInstance, patch: string, options?: { signal?: AbortSignal }): Promise<HarnessResult>;
}

export function errorResult(log: string): HarnessResult {
  return { resolved: false, outcome: 'error', log, failToPass: [], passToPass: [] };
}
