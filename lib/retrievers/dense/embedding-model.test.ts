import { readFile, rm, writeFile, mkdtemp, rename } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  contentWindow,
  embedTexts,
  embedTokenSequences,
  loadEmbeddingModel,
  releaseEmbeddingModel,
  wrapTokens,
  type EmbeddingModel,
} from './embedding-model';
import { copyModelFolder, fixtureModel, writeJson, type FixtureModel } from '../../../test/fixtures/retrievers/dense-fixture';

// A real model: a random 2-layer BERT exported to ONNX by test/python/make_tiny_embedding_model.py, with a
// reference computed by transformers + tokenizers from the same files.

let fixture: FixtureModel;
let tmp: string;
let model: EmbeddingModel;
const opened: EmbeddingModel[] = [];

async function open(dir: string, opts: Parameters<typeof loadEmbeddingModel>[1] = {}): Promise<EmbeddingModel> {
  const m = await loadEmbeddingModel(dir, opts);
  opened.push(m);
  return m;
}

beforeAll(async () => {
  fixture = await fixtureModel('tiny');
  tmp = await mkdtemp(path.join(os.tmpdir(), 'dense-embedding-model-'));
  model = await open(fixture.modelDir);
}, 600_000);

afterAll(async () => {
  for (const m of opened) await releaseEmbeddingModel(m);
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
}

const norm = (v: Float32Array): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

describe('loadEmbeddingModel on the fixture model', () => {
  it('reads the folder: mean pooling, Normalize, max_seq_length, the graph inputs, the [CLS] … [SEP] template', () => {
    expect(model.folder.pooling).toEqual(['mean']);
    expect(model.folder.normalize).toBe(true);
    expect(model.folder.maxSequenceLength).toBe(fixture.reference.max_seq_length);
    expect(model.inputs.map((i) => `${i.name}:${i.type}`)).toEqual(['input_ids:int64', 'attention_mask:int64', 'token_type_ids:int64']);
    expect(model.outputName).toBe('last_hidden_state');
    expect(model.dimension).toBe(32);
    expect(model.tokenizer.prefix).toHaveLength(1);
    expect(model.tokenizer.suffix).toHaveLength(1);
    expect(contentWindow(model, 'document')).toBe(fixture.reference.max_seq_length - 2);
    expect(model.stats).toEqual({ sessionRuns: 0, sequencesEmbedded: 0, tokensEmbedded: 0, inferenceMs: 0 });
  });

  it('tokenizes and embeds exactly like transformers + tokenizers + sentence-transformers mean pooling', async () => {
    const texts = fixture.reference.texts;
    for (const t of texts) expect(wrapTokens(model, model.tokenizer.encode(t.text), 'document')).toEqual(t.input_ids);
    const vectors = await embedTexts(
      model,
      texts.map((t) => t.text),
      'document',
    );
    texts.forEach((t, i) => expect(maxAbsDifference(vectors[i]!, t.mean_normalized)).toBeLessThan(1e-5));
  });

  it('gives cosine 1 for identical text and less for different text', async () => {
    const [a, b, c] = await embedTexts(
      model,
      ['def add(a, b): return a + b', 'def add(a, b): return a + b', 'class Author(models.Model)'],
      'query',
    );
    expect(Math.abs(cosine(a!, b!) - 1)).toBeLessThan(1e-6);
    expect(cosine(a!, c!)).toBeLessThan(0.999);
  });

  it('normalises only when modules.json lists Normalize', async () => {
    const [normalised] = await embedTexts(model, ['import numpy as np'], 'document');
    expect(Math.abs(norm(normalised!) - 1)).toBeLessThan(1e-6);
    const dir = await copyModelFolder(fixture.modelDir, tmp, async (d) => {
      const modules = JSON.parse(await readFile(path.join(d, 'modules.json'), 'utf8')) as { type: string }[];
      await writeJson(
        d,
        'modules.json',
        modules.filter((m) => !m.type.endsWith('Normalize')),
      );
    });
    const raw = await open(dir);
    expect(raw.folder.normalize).toBe(false);
    const [unnormalised] = await embedTexts(raw, ['import numpy as np'], 'document');
    expect(Math.abs(norm(unnormalised!) - 1)).toBeGreaterThan(1e-3);
    // Same direction: normalisation is the only difference.
    expect(Math.abs(cosine(unnormalised!, normalised!) - 1)).toBeLessThan(1e-6);
    expect(raw.fingerprint).not.toBe(model.fingerprint);
  });

  it('pools as 1_Pooling/config.json says: CLS gives the [CLS] vector, different from the mean', async () => {
    const dir = await copyModelFolder(fixture.modelDir, tmp, async (d) => {
      await writeJson(d, '1_Pooling/config.json', { pooling_mode_cls_token: true, pooling_mode_mean_tokens: false });
      await writeJson(d, 'modules.json', JSON.parse(await readFile(path.join(d, 'modules.json'), 'utf8')).slice(0, 2));
    });
    const cls = await open(dir);
    const texts = fixture.reference.texts;
    const clsVectors = await embedTexts(
      cls,
      texts.map((t) => t.text),
      'document',
    );
    const meanVectors = await embedTexts(
      model,
      texts.map((t) => t.text),
      'document',
    );
    texts.forEach((t, i) => {
      expect(maxAbsDifference(clsVectors[i]!, t.cls)).toBeLessThan(1e-5);
      expect(cosine(clsVectors[i]!, meanVectors[i]!)).toBeLessThan(0.99);
    });
  });

  it('batched inference gives the same vectors as one sequence at a time, in input order', async () => {
    const texts = [
      'x',
      'def retrieve(index, query, k=2):\n    return sorted(index.score(query), reverse=True)[:k]',
      'import numpy as np',
      'Traceback (most recent call last): ValueError',
      'the quick brown fox',
      'class QuerySet(models.Manager): pass',
      '',
    ];
    const window = contentWindow(model, 'document');
    const sequences = texts.map((t) => wrapTokens(model, model.tokenizer.encode(t).slice(0, window), 'document'));
    expect(new Set(sequences.map((s) => s.length)).size).toBeGreaterThan(3); // padding really happens
    const runsBefore = model.stats.sessionRuns;
    const single = await embedTokenSequences(model, sequences, { batchSize: 1 });
    expect(model.stats.sessionRuns - runsBefore).toBe(texts.length);
    for (const batchSize of [3, 16]) {
      const runs = model.stats.sessionRuns;
      const batched = await embedTokenSequences(model, sequences, { batchSize });
      expect(model.stats.sessionRuns - runs).toBe(Math.ceil(texts.length / batchSize));
      batched.forEach((v, i) => expect(maxAbsDifference(v, single[i]!)).toBeLessThan(1e-5));
    }
  });

  it('truncates a query longer than the model maximum to its beginning', async () => {
    const long = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');
    const ids = model.tokenizer.encode(long);
    const window = contentWindow(model, 'query');
    expect(ids.length).toBeGreaterThan(window);
    const [truncated] = await embedTexts(model, [long], 'query');
    const [direct] = await embedTokenSequences(model, [wrapTokens(model, ids.slice(0, window), 'query')]);
    expect(maxAbsDifference(truncated!, direct!)).toBe(0);
    await expect(embedTokenSequences(model, [wrapTokens(model, ids, 'query')])).rejects.toThrow(
      /sequence 0 has \d+ tokens \(allowed 1\.\.32\)/,
    );
  });

  it('puts the configured prompts before queries and documents', async () => {
    const dir = await copyModelFolder(fixture.modelDir, tmp, (d) =>
      writeJson(d, 'config_sentence_transformers.json', { prompts: { query: 'query: ', document: 'passage: ' } }),
    );
    const prompted = await open(dir);
    expect(prompted.promptIds.query).toEqual(model.tokenizer.encode('query: '));
    expect(contentWindow(prompted, 'query')).toBe(contentWindow(model, 'query') - prompted.promptIds.query.length);
    const [withPrompt] = await embedTexts(prompted, ['import numpy'], 'query');
    const [byHand] = await embedTexts(model, ['query: import numpy'], 'query');
    expect(maxAbsDifference(withPrompt!, byHand!)).toBeLessThan(1e-6);
    const [asDocument] = await embedTexts(prompted, ['import numpy'], 'document');
    expect(cosine(withPrompt!, asDocument!)).toBeLessThan(0.9999);
    await expect(loadEmbeddingModel(fixture.modelDir, { queryPrompt: 'import '.repeat(40) })).rejects.toThrow(
      /the query prompt and special tokens take 42 of the 32 tokens a sequence may hold/,
    );
  });

  it('loads a graph at the folder root too, and names the file onnxruntime cannot load', async () => {
    const rootGraph = await copyModelFolder(fixture.modelDir, tmp, async (d) => {
      await rename(path.join(d, 'onnx/model.onnx'), path.join(d, 'model.onnx'));
      await rm(path.join(d, 'onnx'), { recursive: true });
    });
    const moved = await open(rootGraph);
    const [a] = await embedTexts(moved, ['import numpy as np'], 'document');
    const [b] = await embedTexts(model, ['import numpy as np'], 'document');
    expect(maxAbsDifference(a!, b!)).toBe(0);

    const corrupt = await copyModelFolder(fixture.modelDir, tmp, (d) => writeFile(path.join(d, 'onnx/model.onnx'), 'not a graph'));
    await expect(loadEmbeddingModel(corrupt)).rejects.toThrow(
      `embedding model ${corrupt}: onnxruntime cannot load ${path.join(corrupt, 'onnx/model.onnx')}`,
    );
    const noTokenizer = await copyModelFolder(fixture.modelDir, tmp, (d) => rm(path.join(d, 'tokenizer.json')));
    await expect(loadEmbeddingModel(noTokenizer)).rejects.toThrow(`embedding model ${noTokenizer}: tokenizer.json is missing`);
    await expect(loadEmbeddingModel(path.join(tmp, 'nowhere'))).rejects.toThrow(
      `embedding model directory ${path.join(tmp, 'nowhere')} does not exist`,
    );
    await expect(loadEmbeddingModel(fixture.modelDir, { batchSize: 0 })).rejects.toThrow(/batchSize must be a positive integer/);
  });
});
