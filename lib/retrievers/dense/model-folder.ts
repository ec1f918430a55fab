import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { MAX_PLAUSIBLE_SEQUENCE_LENGTH } from './params';
import { POOLING_MODES, type PoolingMode } from './pooling';

/**
 * Reads a local embedding-model folder in the layout sentence-transformers writes (and ONNX exports of it
 * keep): the ONNX graph at `model.onnx` or `onnx/model.onnx`, a HF tokenizers `tokenizer.json`, and the
 * configs that say how to pool and normalise. Nothing is fetched: a missing file is an error naming the
 * folder and the file.
 *
 *   modules.json                  the module pipeline: Transformer → Pooling (→ Normalize)
 *   <pooling path>/config.json    pooling_mode_cls_token / _mean_tokens / _max_tokens / _mean_sqrt_len_tokens / _lasttoken
 *   sentence_bert_config.json     max_seq_length (else min(tokenizer_config model_max_length, config max_position_embeddings))
 *   config_sentence_transformers.json   prompts.query / prompts.document, prepended to queries / files
 */

export interface ModelFolderOverrides {
  /** Replaces the pooling of `modules.json` (and makes `modules.json` optional). */
  pooling?: readonly PoolingMode[];
  /** Replaces "is a Normalize module listed". */
  normalize?: boolean;
  /** Replaces the configured maximum sequence length (tokens, special tokens included). */
  maxSequenceLength?: number;
  /** Text prepended to every query (default: config_sentence_transformers.json prompts.query, else none). */
  queryPrompt?: string;
  /** Text prepended to every file chunk (default: prompts.document or prompts.passage, else none). */
  documentPrompt?: string;
}

export interface ModelFolder {
  dir: string;
  onnxPath: string;
  tokenizerJsonPath: string;
  /** Parsed tokenizer.json and tokenizer_config.json ({} when absent). */
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  pooling: PoolingMode[];
  normalize: boolean;
  maxSequenceLength: number;
  queryPrompt: string;
  documentPrompt: string;
  /** Every file the embeddings depend on (graph, external weights, tokenizer, configs), for the fingerprint. */
  files: string[];
}

const ModuleSchema = z.object({ idx: z.number().int().optional(), name: z.string().optional(), path: z.string(), type: z.string() });
const ModulesSchema = z.array(ModuleSchema);

const PoolingConfigSchema = z.object({
  pooling_mode_cls_token: z.boolean().optional(),
  pooling_mode_mean_tokens: z.boolean().optional(),
  pooling_mode_max_tokens: z.boolean().optional(),
  pooling_mode_mean_sqrt_len_tokens: z.boolean().optional(),
  pooling_mode_weightedmean_tokens: z.boolean().optional(),
  pooling_mode_lasttoken: z.boolean().optional(),
  include_prompt: z.boolean().optional(),
});

const SentenceBertConfigSchema = z.object({ max_seq_length: z.number().int().positive().optional() });
const TransformerConfigSchema = z.object({ max_position_embeddings: z.number().int().positive().optional() });
const TokenizerConfigSchema = z.object({ model_max_length: z.number().positive().optional() });
const SentenceTransformersConfigSchema = z.object({ prompts: z.record(z.string(), z.string()).optional() });

/** Module types this retriever can run (the last segment of sentence-transformers' class path). */
const SUPPORTED_MODULES = new Set(['Transformer', 'Pooling', 'Normalize']);

export class ModelFolderError extends Error {
  override readonly name = 'ModelFolderError';
}

async function isFile(p: string): Promise<boolean> {
  return stat(p).then(
    (s) => s.isFile(),
    () => false,
  );
}

async function readJson(dir: string, relative: string): Promise<unknown> {
  const file = path.join(dir, relative);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ModelFolderError(`embedding model ${dir}: cannot read ${relative}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ModelFolderError(`embedding model ${dir}: ${relative} is not valid JSON: ${(error as Error).message}`);
  }
}

async function readOptionalJson<T>(dir: string, relative: string, schema: z.ZodType<T>): Promise<T | undefined> {
  if (!(await isFile(path.join(dir, relative)))) return undefined;
  return parseWith(dir, relative, schema, await readJson(dir, relative));
}

function parseWith<T>(dir: string, relative: string, schema: z.ZodType<T>, value: unknown): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
    throw new ModelFolderError(`embedding model ${dir}: ${relative} is malformed: ${issues}`);
  }
  return parsed.data;
}

function poolingFromConfig(dir: string, relative: string, config: z.infer<typeof PoolingConfigSchema>, hasPrompt: boolean): PoolingMode[] {
  if (config.pooling_mode_weightedmean_tokens) {
    throw new ModelFolderError(`embedding model ${dir}: ${relative} asks for weighted-mean pooling, which is not supported`);
  }
  if (config.include_prompt === false && hasPrompt) {
    throw new ModelFolderError(
      `embedding model ${dir}: ${relative} sets include_prompt: false with a prompt configured, which is not supported`,
    );
  }
  const on: Record<PoolingMode, boolean | undefined> = {
    cls: config.pooling_mode_cls_token,
    max: config.pooling_mode_max_tokens,
    mean: config.pooling_mode_mean_tokens,
    mean_sqrt_len: config.pooling_mode_mean_sqrt_len_tokens,
    lasttoken: config.pooling_mode_lasttoken,
  };
  const modes = POOLING_MODES.filter((m) => on[m] === true);
  if (modes.length === 0) throw new ModelFolderError(`embedding model ${dir}: ${relative} turns on no pooling mode`);
  return modes;
}

/** The ONNX graph's file plus its external-data files (`model.onnx_data`, `model.onnx.data`, …). */
async function onnxFiles(onnxPath: string): Promise<string[]> {
  const base = path.basename(onnxPath);
  const siblings = await readdir(path.dirname(onnxPath));
  return siblings
    .filter((name) => name === base || name.startsWith(`${base}_data`) || name.startsWith(`${base}.data`))
    .sort()
    .map((name) => path.join(path.dirname(onnxPath), name));
}

export async function readModelFolder(dir: string, overrides: ModelFolderOverrides = {}): Promise<ModelFolder> {
  const resolved = await existingDirectory(dir);
  const onnxPath = await findOnnxGraph(resolved);
  const { tokenizerJsonPath, tokenizerJson, tokenizerConfig } = await readTokenizer(resolved);
  const files = [...(await onnxFiles(onnxPath)), tokenizerJsonPath];

  const stConfig = await readOptionalJson(resolved, 'config_sentence_transformers.json', SentenceTransformersConfigSchema);
  const queryPrompt = overrides.queryPrompt ?? stConfig?.prompts?.['query'] ?? '';
  const documentPrompt = overrides.documentPrompt ?? stConfig?.prompts?.['document'] ?? stConfig?.prompts?.['passage'] ?? '';

  const { pooling, normalize } = await readPipeline(resolved, overrides, queryPrompt !== '' || documentPrompt !== '', files);
  const maxSequenceLength = await readMaxSequenceLength(resolved, overrides, tokenizerConfig);
  for (const relative of ['tokenizer_config.json', 'config.json', 'sentence_bert_config.json', 'config_sentence_transformers.json']) {
    if (await isFile(path.join(resolved, relative))) files.push(path.join(resolved, relative));
  }

  return {
    dir: resolved,
    onnxPath,
    tokenizerJsonPath,
    tokenizerJson,
    tokenizerConfig,
    pooling,
    normalize,
    maxSequenceLength,
    queryPrompt,
    documentPrompt,
    files: [...new Set(files)].sort(),
  };
}

/** `dir` resolved, once it is known to be a directory. */
async function existingDirectory(dir: string): Promise<string> {
  const resolved = path.resolve(dir);
  const dirStat = await stat(resolved).catch(() => undefined);
  if (!dirStat) throw new ModelFolderError(`embedding model directory ${resolved} does not exist`);
  if (!dirStat.isDirectory()) throw new ModelFolderError(`embedding model directory ${resolved} is not a directory`);
  return resolved;
}

async function findOnnxGraph(resolved: string): Promise<string> {
  const onnxCandidates = ['model.onnx', 'onnx/model.onnx'];
  for (const candidate of onnxCandidates) {
    if (await isFile(path.join(resolved, candidate))) return path.join(resolved, candidate);
  }
  throw new ModelFolderError(`embedding model ${resolved}: no ONNX graph (looked for ${onnxCandidates.join(' and ')})`);
}

/** tokenizer.json (required) and tokenizer_config.json ({} when absent). */
async function readTokenizer(resolved: string): Promise<Pick<ModelFolder, 'tokenizerJsonPath' | 'tokenizerJson' | 'tokenizerConfig'>> {
  const tokenizerJsonPath = path.join(resolved, 'tokenizer.json');
  if (!(await isFile(tokenizerJsonPath))) {
    throw new ModelFolderError(`embedding model ${resolved}: tokenizer.json is missing (a HF tokenizers file is required)`);
  }
  const tokenizerJson = parseWith(
    resolved,
    'tokenizer.json',
    z.record(z.string(), z.unknown()),
    await readJson(resolved, 'tokenizer.json'),
  );
  const tokenizerConfig = (await readOptionalJson(resolved, 'tokenizer_config.json', z.record(z.string(), z.unknown()))) ?? {};
  return { tokenizerJsonPath, tokenizerJson, tokenizerConfig };
}

/**
 * The pooling and normalisation: the overrides, and what modules.json (and its Pooling module's config) says for
 * what they leave out. The configs read are added to `files`.
 */
async function readPipeline(
  resolved: string,
  overrides: ModelFolderOverrides,
  hasPrompt: boolean,
  files: string[],
): Promise<Pick<ModelFolder, 'pooling' | 'normalize'>> {
  let pooling = overrides.pooling ? [...overrides.pooling] : undefined;
  let normalize = overrides.normalize;
  if (pooling === undefined || normalize === undefined) {
    const { modules, kinds } = await readModules(resolved);
    normalize ??= kinds.includes('Normalize');
    if (pooling === undefined) {
      const poolingModule = modules[kinds.indexOf('Pooling')];
      if (!poolingModule)
        throw new ModelFolderError(`embedding model ${resolved}: modules.json lists no Pooling module (or pass pooling explicitly)`);
      const relative = path.posix.join(poolingModule.path, 'config.json');
      if (!(await isFile(path.join(resolved, relative)))) {
        throw new ModelFolderError(`embedding model ${resolved}: ${relative} is missing (the Pooling module's config)`);
      }
      const config = parseWith(resolved, relative, PoolingConfigSchema, await readJson(resolved, relative));
      pooling = poolingFromConfig(resolved, relative, config, hasPrompt);
      files.push(path.join(resolved, relative));
    }
    files.push(path.join(resolved, 'modules.json'));
  }
  if (pooling.length === 0) throw new ModelFolderError(`embedding model ${resolved}: the pooling override is empty`);
  return { pooling, normalize };
}

/** modules.json and each module's kind (the last segment of its class path), once every kind is one this retriever runs. */
async function readModules(resolved: string): Promise<{ modules: z.infer<typeof ModulesSchema>; kinds: string[] }> {
  if (!(await isFile(path.join(resolved, 'modules.json')))) {
    throw new ModelFolderError(
      `embedding model ${resolved}: modules.json is missing, so the pooling and normalisation are unknown (or pass pooling and normalize explicitly)`,
    );
  }
  const modules = parseWith(resolved, 'modules.json', ModulesSchema, await readJson(resolved, 'modules.json'));
  const kinds = modules.map((m) => m.type.split('.').pop()!);
  const unsupported = modules.filter((_, i) => !SUPPORTED_MODULES.has(kinds[i]!)).map((m) => m.type);
  if (unsupported.length > 0) {
    throw new ModelFolderError(
      `embedding model ${resolved}: modules.json lists modules this retriever cannot run: ${unsupported.join(', ')}`,
    );
  }
  return { modules, kinds };
}

/** The override, else sentence_bert_config.json's, else the smaller plausible limit of the tokenizer and the model. */
async function readMaxSequenceLength(
  resolved: string,
  overrides: ModelFolderOverrides,
  tokenizerConfig: Record<string, unknown>,
): Promise<number> {
  const sbert = await readOptionalJson(resolved, 'sentence_bert_config.json', SentenceBertConfigSchema);
  const transformer = await readOptionalJson(resolved, 'config.json', TransformerConfigSchema);
  const tokenizerLimit = parseWith(resolved, 'tokenizer_config.json', TokenizerConfigSchema, tokenizerConfig).model_max_length;
  let maxSequenceLength = overrides.maxSequenceLength ?? sbert?.max_seq_length;
  if (maxSequenceLength === undefined) {
    const limits = [tokenizerLimit, transformer?.max_position_embeddings].filter(
      (n): n is number => n !== undefined && n < MAX_PLAUSIBLE_SEQUENCE_LENGTH,
    );
    if (limits.length === 0) {
      throw new ModelFolderError(
        `embedding model ${resolved}: no maximum sequence length in sentence_bert_config.json, tokenizer_config.json or config.json (pass maxSequenceLength)`,
      );
    }
    maxSequenceLength = Math.floor(Math.min(...limits));
  }
  if (!Number.isInteger(maxSequenceLength) || maxSequenceLength < 2) {
    throw new ModelFolderError(`embedding model ${resolved}: maximum sequence length must be an integer >= 2, got ${maxSequenceLength}`);
  }
  return maxSequenceLength;
}
