import { z } from 'zod';
import { JudgeCandidateSchema, JudgementSchema, type JudgeCandidate, type Judgement } from '../../schemas/judge';

/**
 * Which candidates the judge still has to ask (CodeGrep App. A.2: the judge resumes from its real-time
 * appends). A killed run leaves its verdicts in the shards; the next attempt reads them back
 * (`knownJudgements`), and `createCandidateGate` passes over every candidate that already has one, every
 * second copy of a candidate within the run, and every malformed candidate, so nothing is asked twice.
 */

/** How judgements are keyed: one per (trajectory, file). */
export function judgementKey(trajectoryId: string, path: string): string {
  return `${trajectoryId}\u0000${path}`;
}

/** The judgements an earlier attempt appended to the shards, by `judgementKey` (malformed lines are skipped). */
export function knownJudgements(records: readonly unknown[]): Map<string, Judgement> {
  const known = new Map<string, Judgement>();
  for (const record of records) {
    const parsed = JudgementSchema.safeParse(record);
    if (parsed.success) known.set(judgementKey(parsed.data.trajectoryId, parsed.data.path), parsed.data);
  }
  return known;
}

/** What the gate decided for one input candidate. */
export type CandidateAdmission =
  /** Not a valid JudgeCandidate; `message` names it by its 1-based position in the input. */
  | { kind: 'invalid'; message: string }
  /** `alreadyJudged` holds its key: judged by an earlier attempt. */
  | { kind: 'resumed' }
  /** A key this gate already admitted. */
  | { kind: 'duplicate' }
  /** To be judged. */
  | { kind: 'new'; candidate: JudgeCandidate };

/**
 * A stateful filter over the input stream: call it once per raw candidate, in input order. `ordinal` is the
 * candidate's 1-based position, used only to name an invalid one.
 */
export function createCandidateGate(alreadyJudged: ReadonlySet<string>): (raw: unknown, ordinal: number) => CandidateAdmission {
  const admitted = new Set<string>();
  return (raw, ordinal) => {
    const parsed = JudgeCandidateSchema.safeParse(raw);
    if (!parsed.success) {
      return { kind: 'invalid', message: `candidate #${ordinal}: ${z.prettifyError(parsed.error).replace(/\n/g, ' ')}` };
    }
    const candidate = parsed.data;
    const key = judgementKey(candidate.trajectoryId, candidate.path);
    if (alreadyJudged.has(key)) return { kind: 'resumed' };
    if (admitted.has(key)) return { kind: 'duplicate' };
    admitted.add(key);
    return { kind: 'new', candidate };
  };
}
