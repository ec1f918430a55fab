import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { log } from '@temporalio/activity';
import { hashConfig, sourceRef } from '../lib/artifacts';
import type { ArtifactRef } from '../schemas/artifact-ref';
import {
  PlanEvaluationInputSchema,
  type EvaluationPlan,
  type PlanEvaluationInput,
  type RetrieverConfig,
  type RetrieverPlan,
} from '../schemas/evaluation';
import { loadEvaluationInstances, shardCountFor } from '../lib/evaluation/instances';
import { invalidInput } from './kit';

/**
 * A model folder's identity for the cache key: every file's relative path, size and modification time.
 * Hashing the bytes of a multi-GB ONNX model on every run would cost more than the BM25 evaluation itself.
 */
async function folderFingerprint(dir: string): Promise<string> {
  const entries: { file: string; bytes: number; mtimeMs: number }[] = [];
  const walk = async (relative: string): Promise<void> => {
    for (const entry of await readdir(path.join(dir, relative), { withFileTypes: true })) {
      const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) await walk(child);
      else if (entry.isFile()) {
        const info = await stat(path.join(dir, child));
        entries.push({ file: child, bytes: info.size, mtimeMs: info.mtimeMs });
      }
    }
  };
  await walk('');
  entries.sort((a, b) => (a.file < b.file ? -1 : 1));
  return hashConfig(entries);
}

async function retrieverInputs(retriever: RetrieverConfig): Promise<{ inputs: ArtifactRef[]; fingerprint: string | null }> {
  if (retriever.kind === 'predictions') return { inputs: [await sourceRef(retriever.path)], fingerprint: null };
  if (retriever.kind === 'dense') return { inputs: [], fingerprint: await folderFingerprint(retriever.modelDir) };
  return { inputs: [], fingerprint: null };
}

/**
 * What a retriever's predictions depend on. A served trained policy is named by its checkpoint (run, step,
 * adapter sha256), not by the port its server happened to get: a rerun that serves the same checkpoint again
 * reuses the finished shards, and another checkpoint never does.
 */
function predictionIdentity(retriever: RetrieverConfig): unknown {
  if (retriever.kind !== 'agent' || !retriever.served) return retriever;
  const { baseUrl: _url, served, ...rest } = retriever;
  const { baseUrl: _servedUrl, requestLog: _log, ...checkpoint } = served;
  return { ...rest, served: checkpoint };
}

/**
 * Plans the evaluation: which instances (samples with ground truth, optionally a subset), how many shards,
 * and per retriever the folder its shards go to. The folder's name carries a hash of everything the
 * retriever's predictions depend on (its config, the instances, the samples' and predictions file's bytes,
 * the dense model's files), so a folder only ever holds shards of one plan, and a finished shard in it is a
 * cache hit for a rerun of the same plan.
 */
export async function planEvaluation(rawInput: PlanEvaluationInput): Promise<EvaluationPlan> {
  const input = PlanEvaluationInputSchema.parse(rawInput);
  const { evaluation } = input;
  const loaded = await loadEvaluationInstances(input.samples.uri, evaluation.instances);
  if (loaded.unknown.length > 0) {
    const more = loaded.unknown.length > 10 ? ` (and ${loaded.unknown.length - 10} more)` : '';
    throw invalidInput(
      `evaluation.instances: ${loaded.unknown.slice(0, 10).join(', ')}${more} are not samples with ground truth in ${input.samples.uri}`,
    );
  }
  if (loaded.instances.length === 0) {
    const excluded = `${loaded.withoutGroundTruth} without ground truth, ${loaded.notSelected} not selected`;
    throw invalidInput(`no sample in ${input.samples.uri} has ground truth to evaluate against (${excluded})`);
  }
  const outputDir = path.join(input.runDir, 'evaluation', ...(input.outputLabel ? [input.outputLabel] : []));
  const shardCount = shardCountFor(loaded.instances.length, evaluation.shardSize);
  const instanceIds = loaded.instances.map((i) => i.instanceId);
  const retrievers: RetrieverPlan[] = [];
  for (const retriever of evaluation.retrievers) {
    const { inputs, fingerprint } = await retrieverInputs(retriever);
    const planHash = hashConfig({
      retriever: predictionIdentity(retriever),
      fileTarget: evaluation.fileTarget,
      shardSize: evaluation.shardSize,
      instanceIds,
      samples: input.samples.sha256,
      inputs: inputs.map((i) => i.sha256),
      fingerprint,
    });
    retrievers.push({
      name: retriever.name,
      kind: retriever.kind,
      shardDir: path.join(outputDir, 'shards', `${retriever.name}-${planHash.slice(0, 12)}`),
      planHash,
      inputs,
    });
  }
  log.info('evaluation: planned', { instances: loaded.instances.length, shards: shardCount, retrievers: retrievers.length });
  return {
    outputDir,
    instances: loaded.instances.length,
    shardCount,
    excluded: { withoutGroundTruth: loaded.withoutGroundTruth, notSelected: loaded.notSelected },
    retrievers,
  };
}
