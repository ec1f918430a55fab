import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { findCachedArtifact, hashConfig, readParquetObjects, writeBytesAtomically, writeParquetArtifact } from '../artifacts';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import {
  RFT_SAMPLED_SCHEMA_NAME,
  RFT_SCHEMA_VERSION,
  RFT_TRAJECTORIES_SCHEMA_NAME,
  rftTrajectoryColumns,
  type RftTrajectoryRow,
} from '../../schemas/rft';
import { rftLayout } from './sample-shard';

/** Reads an RFT trajectories artifact (shard, sampled or final) row by row through its zod schema. */
export async function readRftRows(uri: string): Promise<RftTrajectoryRow[]> {
  return (await readParquetObjects(uri)).map((row, i) => {
    const parsed = rftTrajectoryColumns.zod.safeParse(row);
    if (!parsed.success) throw new Error(`${uri} row ${i}: not an RFT trajectory row: ${parsed.error.issues[0]?.message}`);
    return parsed.data;
  });
}

/** One kept trajectory as trainer.sft reads it (its `examples_path`, one JSON object per line). */
export function sftExampleLine(row: RftTrajectoryRow): string {
  return JSON.stringify({ instance_id: row.instanceId, messages: JSON.parse(row.messages), tools: JSON.parse(row.tools) }) + '\n';
}

/**
 * Every shard's rollouts as one artifact (`rft/sampled.parquet`, kept flag and all), and the kept ones as
 * trainer.sft's examples file (`rft/sft/examples.jsonl`). An instance appears once: shards hold disjoint
 * instances, and two rows of one instance are refused as a bug rather than fine-tuned on twice.
 */
export async function collectRft(runDir: string, shards: readonly ArtifactRef[]) {
  const layout = rftLayout(runDir);
  const expectation = {
    schemaName: RFT_SAMPLED_SCHEMA_NAME,
    schemaVersion: RFT_SCHEMA_VERSION,
    inputs: [...shards],
    configHash: hashConfig({ stage: 'rft-collect' }),
  };
  const rows: RftTrajectoryRow[] = [];
  for (const shard of shards) rows.push(...(await readRftRows(shard.uri)));
  const seen = new Set<string>();
  for (const row of rows) {
    if (seen.has(row.instanceId)) throw new Error(`rft: instance ${row.instanceId} was sampled in two shards`);
    seen.add(row.instanceId);
  }
  rows.sort((a, b) => (a.instanceId < b.instanceId ? -1 : a.instanceId > b.instanceId ? 1 : 0));
  const sampled =
    (await findCachedArtifact(layout.sampled, expectation)) ??
    (await writeParquetArtifact({ path: layout.sampled, arrowSchema: rftTrajectoryColumns.arrowSchema(), rows, ...expectation }));
  const kept = rows.filter((r) => r.kept);
  const examplesPath = path.join(layout.sft, 'examples.jsonl');
  await writeBytesAtomically(examplesPath, kept.map(sftExampleLine).join(''));
  return { sampled, examplesPath, total: rows.length, kept: kept.length, failed: rows.filter((r) => r.error !== null).length };
}

/** trainer.sft's tokens_out: one line per example, `{instance_id, input_ids, policy_mask}`. */
export async function readSftTokens(file: string): Promise<Map<string, { inputIds: number[]; policyMask: number[] }>> {
  const tokens = new Map<string, { inputIds: number[]; policyMask: number[] }>();
  const text = await readFile(file, 'utf8');
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const value = JSON.parse(line) as { instance_id?: unknown; input_ids?: unknown; policy_mask?: unknown };
    const ids = value.input_ids;
    const mask = value.policy_mask;
    if (typeof value.instance_id !== 'string' || !Array.isArray(ids) || !Array.isArray(mask) || ids.length !== mask.length)
      throw new Error(`${file} line ${i + 1}: expected {instance_id, input_ids, policy_mask} with equally long lists`);
    tokens.set(value.instance_id, { inputIds: ids as number[], policyMask: mask as number[] });
  });
  return tokens;
}

/**
 * The RFT artifact (`rft/trajectories.parquet`): every sampled rollout with its kept flag, and for the kept ones
 * the token ids and policy mask trainer.sft trained on. A kept rollout the trainer did not tokenize is an error.
 */
export async function writeRftTrajectories(runDir: string, sampled: ArtifactRef, tokensPath: string): Promise<ArtifactRef> {
  const layout = rftLayout(runDir);
  const tokens = await readSftTokens(tokensPath);
  const rows = (await readRftRows(sampled.uri)).map((row) => {
    if (!row.kept) return row;
    const own = tokens.get(row.instanceId);
    if (!own) throw new Error(`rft: kept instance ${row.instanceId} has no line in trainer.sft's tokens_out ${tokensPath}`);
    return { ...row, inputIds: own.inputIds, policyMask: own.policyMask };
  });
  return writeParquetArtifact({
    path: layout.trajectories,
    schemaName: RFT_TRAJECTORIES_SCHEMA_NAME,
    schemaVersion: RFT_SCHEMA_VERSION,
    arrowSchema: rftTrajectoryColumns.arrowSchema(),
    rows,
    inputs: [sampled],
    configHash: hashConfig({ stage: 'rft-trajectories', tokens: [...tokens.keys()].sort() }),
  });
}
