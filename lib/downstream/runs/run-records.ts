import { checkCachedArtifact, InputFileError, readJsonArtifact, sha256File } from '../../artifacts';
import type { ArtifactRef } from '../../../schemas/artifact-ref';
import { DownstreamPlanSchema, type DownstreamPlan, type PlannedPair } from '../../../schemas/downstream/plan';
import {
  DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
  DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
  DownstreamRunRecordSchema,
  type DownstreamRunRecord,
} from '../../../schemas/downstream/run-record';
import type { DownstreamRunRow } from '../../../schemas/downstream/runs';

/** What a pair's record manifest must say for the record to be reused: the run record schema and the pair's run hash. */
export const recordExpectation = (pair: Pick<PlannedPair, 'runHash'>) => ({
  schemaName: DOWNSTREAM_RUN_RECORD_SCHEMA_NAME,
  schemaVersion: DOWNSTREAM_RUN_RECORD_SCHEMA_VERSION,
  inputs: [],
  configHash: pair.runHash,
});

/** Whether the pair's record is there and was made under the same settings (the manifest only, not the record). */
export async function hasFinishedRecord(pair: Pick<PlannedPair, 'recordPath' | 'runHash'>): Promise<boolean> {
  return (await checkCachedArtifact(pair.recordPath, recordExpectation(pair))).hit;
}

/** The pair's finished record, or null when there is none or it was made under other settings. */
export async function finishedRecord(pair: PlannedPair): Promise<{ ref: ArtifactRef; record: DownstreamRunRecord } | null> {
  const check = await checkCachedArtifact(pair.recordPath, recordExpectation(pair));
  if (!check.hit) return null;
  const parsed = DownstreamRunRecordSchema.safeParse(await readJsonArtifact(check.ref.uri));
  return parsed.success ? { ref: check.ref, record: parsed.data } : null;
}

// A plan is read once per process and plan: every pair's activity needs it, and a study has thousands of pairs.
const plans = new Map<string, DownstreamPlan>();
const PLANS_KEPT = 4;

/** The plan the workflow planned, checked against its sha256 (a plan changed on disk is an InputFileError). */
export async function loadPlan(ref: ArtifactRef): Promise<DownstreamPlan> {
  const cached = plans.get(ref.sha256);
  if (cached) return cached;
  const actual = await sha256File(ref.uri).catch(() => null);
  if (actual !== ref.sha256) {
    const what = actual === null ? 'is missing' : 'changed on disk';
    throw new InputFileError(ref.uri, `downstream plan ${ref.uri} ${what} since the workflow planned it; start the stage again`);
  }
  const plan = DownstreamPlanSchema.parse(await readJsonArtifact(ref.uri));
  if (plans.size >= PLANS_KEPT) plans.delete(plans.keys().next().value!);
  plans.set(ref.sha256, plan);
  return plan;
}

/** The planned pair (configuration, instanceId), if the plan has it. */
export function findPair(plan: DownstreamPlan, configuration: string, instanceId: string): PlannedPair | undefined {
  return plan.pairs.find((p) => p.configuration === configuration && p.instanceId === instanceId);
}

/** Every planned pair's finished row, in plan order, with its record's sha256; `missing` names the pairs without one. */
export async function finishedRows(plan: DownstreamPlan): Promise<{ rows: DownstreamRunRow[]; recordShas: string[]; missing: string[] }> {
  const rows: DownstreamRunRow[] = [];
  const recordShas: string[] = [];
  const missing: string[] = [];
  for (const pair of plan.pairs) {
    const finished = await finishedRecord(pair);
    if (!finished) missing.push(`(${pair.configuration}, ${pair.instanceId})`);
    else {
      rows.push(finished.record.row);
      recordShas.push(finished.ref.sha256);
    }
  }
  return { rows, recordShas, missing };
}
