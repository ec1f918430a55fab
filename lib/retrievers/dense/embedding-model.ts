import path from 'node:path';
import { performance } from 'node:perf_hooks';
import * as ort from 'onnxruntime-node';
import { hashConfig } from '../../artifacts/config-hash';
import { sha256File } from '../../artifacts/sha256-file';
import { readModelFolder, type ModelFolder, type ModelFolderOverrides } from './model-folder';
import { DEFAULT_BATCH_SIZE } from './params';
import { l2NormalizeInPlace, poolTokenEmbeddings } from './pooling';
import { createTextTokenizer, type TextTokenizer } from './text-tokenizer';

/**
 * A transformer embedding model run by onnxruntime-node on the CPU: token sequences in, one pooled (and,
 * when the model says so, L2-normalised) vector per sequence out. Sequences are batched by length (longest
 * first, so each batch pads little), right-padded with an attention mask of 0, and put back in input order.
 */

export interface EmbeddingModelOptions extends ModelFolderOverrides {
  /** Sequences per onnxruntime call (default DEFAULT_BATCH_SIZE). */
  batchSize?: number;
  /** onnxruntime's intra-op threads (default: onnxruntime's choice, one per core). */
  intraOpNumThreads?: number;
}

export type TextRole = 'query' | 'document';

export interface EmbeddingModelStats {
  /** onnxruntime `session.run` calls made so far. */
  sessionRuns: number;
  sequencesEmbedded: number;
  /** Real (unpadded) tokens fed to the model, special tokens included. */
  tokensEmbedded: number;
  /** Wall-clock milliseconds spent building tensors, in onnxruntime and pooling (not tokenising). */
  inferenceMs: number;
}

export interface EmbeddingModel {
  folder: ModelFolder;
  tokenizer: TextTokenizer;
  session: ort.InferenceSession;
  batchSize: number;
  /** sha256 over the model's files and the settings that change its vectors: the embedding cache's key. */
  fingerprint: string;
  /** Token ids of the query / document prompt (no special tokens). */
  promptIds: Record<TextRole, number[]>;
  stats: EmbeddingModelStats;
  /** Length of one embedding (hidden size × pooling modes). */
  dimension: number;
  /** How each graph input is fed, in the session's input order. */
  inputs: GraphInput[];
  outputName: string;
}

type InputKind = 'input_ids' | 'attention_mask' | 'token_type_ids' | 'position_ids';
interface GraphInput {
  name: string;
  kind: InputKind;
  type: 'int64' | 'int32';
}

const INPUT_KINDS: readonly InputKind[] = ['input_ids', 'attention_mask', 'token_type_ids', 'position_ids'];
const PREFERRED_OUTPUTS = ['last_hidden_state', 'token_embeddings'];

function positiveInteger(value: number | undefined, fallback: number, what: string): number {
  const n = value ?? fallback;
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`${what} must be a positive integer, got ${n}`);
  return n;
}

/** Loads the model folder at `dir` (see model-folder.ts) and opens its ONNX graph. */
export async function loadEmbeddingModel(dir: string, opts: EmbeddingModelOptions = {}): Promise<EmbeddingModel> {
  const batchSize = positiveInteger(opts.batchSize, DEFAULT_BATCH_SIZE, 'batchSize');
  const folder = await readModelFolder(dir, opts);
  const tokenizer = createTextTokenizer(folder);
  const sessionOptions: ort.InferenceSession.SessionOptions = { graphOptimizationLevel: 'all' };
  if (opts.intraOpNumThreads !== undefined)
    sessionOptions.intraOpNumThreads = positiveInteger(opts.intraOpNumThreads, 1, 'intraOpNumThreads');
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(folder.onnxPath, sessionOptions);
  } catch (error) {
    throw new Error(`embedding model ${folder.dir}: onnxruntime cannot load ${folder.onnxPath}: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const inputs: GraphInput[] = [];
  const unknown: string[] = [];
  for (const meta of session.inputMetadata) {
    const kind = INPUT_KINDS.find((k) => k === meta.name);
    const type = meta.isTensor ? meta.type : undefined;
    if (!kind || (type !== 'int64' && type !== 'int32')) unknown.push(`${meta.name}${type ? ` (${type})` : ''}`);
    else inputs.push({ name: meta.name, kind, type });
  }
  if (unknown.length > 0 || !inputs.some((i) => i.kind === 'input_ids')) {
    await session.release();
    throw new Error(
      `embedding model ${folder.dir}: ${path.basename(folder.onnxPath)} has inputs this retriever cannot feed: ` +
        `${unknown.join(', ') || 'no input_ids'} (supported: int64/int32 ${INPUT_KINDS.join(', ')}; export encoders without past key values)`,
    );
  }
  const outputName = PREFERRED_OUTPUTS.find((n) => session.outputNames.includes(n)) ?? session.outputNames[0]!;
  const fileHashes = await Promise.all(
    folder.files.map(async (file) => ({ file: path.relative(folder.dir, file), sha256: await sha256File(file) })),
  );
  const fingerprint = hashConfig({
    files: fileHashes,
    pooling: folder.pooling,
    normalize: folder.normalize,
    maxSequenceLength: folder.maxSequenceLength,
    queryPrompt: folder.queryPrompt,
    documentPrompt: folder.documentPrompt,
    outputName,
  });
  const model: EmbeddingModel = {
    folder,
    tokenizer,
    session,
    batchSize,
    fingerprint,
    promptIds: { query: tokenizer.encode(folder.queryPrompt), document: tokenizer.encode(folder.documentPrompt) },
    stats: { sessionRuns: 0, sequencesEmbedded: 0, tokensEmbedded: 0, inferenceMs: 0 },
    inputs,
    outputName,
    dimension: 0,
  };
  // One probe run: a graph whose output cannot be pooled fails here, at load, and the dimension is known
  // before any file is embedded. Not counted in the stats.
  try {
    const window = Math.min(contentWindow(model, 'query'), contentWindow(model, 'document'));
    const [probe] = await embedTokenSequences(model, [wrapTokens(model, tokenizer.encode('hello world').slice(0, window), 'document')]);
    model.dimension = probe!.length;
  } catch (error) {
    await session.release();
    throw error;
  }
  model.stats = { sessionRuns: 0, sequencesEmbedded: 0, tokensEmbedded: 0, inferenceMs: 0 };
  return model;
}

export async function releaseEmbeddingModel(model: EmbeddingModel): Promise<void> {
  await model.session.release();
}

/** Content tokens that fit in one sequence beside the special tokens and the role's prompt. */
export function contentWindow(model: EmbeddingModel, role: TextRole): number {
  const reserved = model.tokenizer.prefix.length + model.tokenizer.suffix.length + model.promptIds[role].length;
  const window = model.folder.maxSequenceLength - reserved;
  if (window < 1) {
    throw new Error(
      `embedding model ${model.folder.dir}: the ${role} prompt and special tokens take ${reserved} of the ${model.folder.maxSequenceLength} tokens a sequence may hold`,
    );
  }
  return window;
}

/** The model's input for content tokens: special tokens around the role's prompt and the content. */
export function wrapTokens(model: EmbeddingModel, content: readonly number[], role: TextRole): number[] {
  return [...model.tokenizer.prefix, ...model.promptIds[role], ...content, ...model.tokenizer.suffix];
}

/**
 * One vector per text: the text is tokenised, cut to the content window (sentence-transformers truncates
 * the same way: a query longer than the model's maximum keeps its beginning) and embedded.
 */
export async function embedTexts(model: EmbeddingModel, texts: readonly string[], role: TextRole): Promise<Float32Array[]> {
  const window = contentWindow(model, role);
  return embedTokenSequences(
    model,
    texts.map((text) => wrapTokens(model, model.tokenizer.encode(text).slice(0, window), role)),
  );
}

/** One vector per token sequence (special tokens included, at most the model's maximum length each). */
export async function embedTokenSequences(
  model: EmbeddingModel,
  sequences: readonly (readonly number[])[],
  opts: { batchSize?: number } = {},
): Promise<Float32Array[]> {
  const batchSize = positiveInteger(opts.batchSize, model.batchSize, 'batchSize');
  sequences.forEach((s, i) => {
    if (s.length === 0 || s.length > model.folder.maxSequenceLength) {
      throw new RangeError(`embedTokenSequences: sequence ${i} has ${s.length} tokens (allowed 1..${model.folder.maxSequenceLength})`);
    }
  });
  const order = sequences.map((_, i) => i).sort((a, b) => sequences[b]!.length - sequences[a]!.length || a - b);
  const out = new Array<Float32Array>(sequences.length);
  for (let from = 0; from < order.length; from += batchSize) {
    const ids = order.slice(from, from + batchSize);
    const vectors = await runBatch(
      model,
      ids.map((i) => sequences[i]!),
    );
    ids.forEach((i, j) => {
      out[i] = vectors[j]!;
    });
  }
  return out;
}

async function runBatch(model: EmbeddingModel, batch: readonly (readonly number[])[]): Promise<Float32Array[]> {
  const started = performance.now();
  const rows = batch.length;
  const width = Math.max(...batch.map((s) => s.length));
  const mask = new Uint8Array(rows * width);
  const values: Record<InputKind, number[]> = {
    input_ids: new Array<number>(rows * width).fill(model.tokenizer.padId),
    attention_mask: new Array<number>(rows * width).fill(0),
    token_type_ids: new Array<number>(rows * width).fill(0),
    position_ids: new Array<number>(rows * width).fill(0),
  };
  batch.forEach((sequence, r) => {
    sequence.forEach((id, t) => {
      values.input_ids[r * width + t] = id;
      values.attention_mask[r * width + t] = 1;
      values.position_ids[r * width + t] = t;
      mask[r * width + t] = 1;
    });
  });
  const feeds: Record<string, ort.Tensor> = {};
  for (const input of model.inputs) {
    const data = values[input.kind];
    feeds[input.name] =
      input.type === 'int64'
        ? new ort.Tensor(
            'int64',
            BigInt64Array.from(data, (v) => BigInt(v)),
            [rows, width],
          )
        : new ort.Tensor('int32', Int32Array.from(data), [rows, width]);
  }
  const results = await model.session.run(feeds);
  model.stats.sessionRuns++;
  const output = results[model.outputName] as ort.Tensor | undefined;
  if (!output || output.type !== 'float32' || output.dims.length !== 3 || output.dims[0] !== rows || output.dims[1] !== width) {
    throw new Error(
      `embedding model ${model.folder.dir}: output ${model.outputName} is ${output ? `${output.type} [${output.dims.join(', ')}]` : 'missing'}, ` +
        `expected float32 token embeddings [${rows}, ${width}, hidden]`,
    );
  }
  const pooled = poolTokenEmbeddings(
    { data: output.data as Float32Array, batch: rows, sequence: width, hidden: output.dims[2]!, mask },
    model.folder.pooling,
  );
  if (model.folder.normalize) pooled.forEach(l2NormalizeInPlace);
  model.stats.sequencesEmbedded += rows;
  model.stats.tokensEmbedded += batch.reduce((n, s) => n + s.length, 0);
  model.stats.inferenceMs += performance.now() - started;
  return pooled;
}
