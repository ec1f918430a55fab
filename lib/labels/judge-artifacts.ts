import { readArtifactRows, readRows } from '../artifacts';
import type { JudgeCounts } from '../../schemas/catm';
import { parseInstanceRecord, problemStatementOf } from '../../schemas/instances';
import { JudgementSchema, keepsFile, type JudgeVerdict } from '../../schemas/judge';
import { MinedCandidateSchema, type MinedCandidate } from '../../schemas/mining';
import { judgementKey } from './judge-resume';

/** What the judge stage reads and writes around `judgeCandidates`: candidates, task texts, shards, counts. */

export function readMinedCandidates(uri: string): AsyncGenerator<MinedCandidate> {
  return readArtifactRows(uri, (row) => MinedCandidateSchema.parse(row), 'candidates artifact');
}

/** Problem statements of the instances that have candidates (the judge prompt shows the task). */
export async function problemStatements(instancesPath: string, wanted: ReadonlySet<string>): Promise<Map<string, string>> {
  const statements = new Map<string, string>();
  for await (const record of readRows(instancesPath)) {
    const parsed = parseInstanceRecord(record, `instances ${instancesPath}`);
    if (parsed.ok && wanted.has(parsed.instance.instance_id))
      statements.set(parsed.instance.instance_id, problemStatementOf(parsed.instance) ?? '');
  }
  return statements;
}

/** The stage's counts, from a written judgements artifact (so a cache hit reports the same as the run). */
export async function countVerdicts(uri: string): Promise<JudgeCounts> {
  const counts: JudgeCounts = { candidates: 0, relevant: 0, notRelevant: 0, defaulted: 0, skipped: 0, errors: 0, resumed: 0 };
  for await (const record of readRows(uri)) {
    if ('error' in record) continue;
    const judgement = JudgementSchema.parse(record.row);
    counts.candidates++;
    if (judgement.verdict === 'RELEVANT') counts.relevant++;
    else if (judgement.verdict === 'NOT_RELEVANT') counts.notRelevant++;
    else if (judgement.verdict === 'SKIPPED') counts.skipped++;
    else if (judgement.error) counts.errors++;
    else counts.defaulted++;
  }
  return counts;
}

/**
 * The candidates the judge kept (CodeGrep §3.4: anything not explicitly NOT_RELEVANT), with their verdicts, in
 * candidate order. Returns a function so the weighting stage can stream them once per pass.
 */
export async function keptCandidates(
  candidatesUri: string,
  judgementsUri: string,
): Promise<() => AsyncGenerator<{ candidate: MinedCandidate; verdict: JudgeVerdict }>> {
  const verdicts = new Map<string, JudgeVerdict>();
  for await (const judgement of readArtifactRows(judgementsUri, (row) => JudgementSchema.parse(row))) {
    verdicts.set(judgementKey(judgement.trajectoryId, judgement.path), judgement.verdict);
  }
  return async function* () {
    for await (const candidate of readArtifactRows(candidatesUri, (row) => MinedCandidateSchema.parse(row))) {
      const verdict = verdicts.get(judgementKey(candidate.trajectoryId, candidate.path));
      if (verdict === undefined) throw new Error(`weight: candidate ${candidate.trajectoryId} ${candidate.path} has no judgement`);
      if (keepsFile(verdict)) yield { candidate, verdict };
    }
  };
}
