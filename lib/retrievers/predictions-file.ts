import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { PredictionLineSchema, type Prediction, type PredictionLine } from '../../schemas/predictions';
import { modulesFromEntities } from '../metrics/levels';
import { topK } from '../metrics/ranked';
import { dedupeEntityIds, dedupePaths } from '../paths/normalize';

/**
 * Predictions of any outside retrieval system, read from JSONL (schemas/predictions.ts). A bad line is
 * counted and described, never fatal; the first line for an instance wins and later ones are reported as
 * duplicates.
 */

export interface PredictionLineError {
  /** 1-based line number. */
  line: number;
  message: string;
}

export interface PredictionsFile {
  predictions: Prediction[];
  /** Lines that could not be used (bad JSON, schema violations, duplicate instance ids). */
  errors: PredictionLineError[];
  linesRead: number;
  blankLines: number;
}

export interface ReadPredictionsOptions {
  /** Keep only the first K entries of each list after normalisation (Return@K, CodeScout App. G). */
  topK?: number;
}

/**
 * One validated line as a Prediction: lists normalised and de-duplicated in rank order. When the line has
 * entities but no modules, modules are the classes its `file:Class.method` entities name.
 */
export function toPrediction(line: PredictionLine): Prediction {
  const functions = line.found_entities === undefined ? undefined : dedupeEntityIds(line.found_entities);
  const modules =
    line.found_modules !== undefined
      ? dedupeEntityIds(line.found_modules)
      : functions !== undefined
        ? modulesFromEntities(functions)
        : undefined;
  return {
    instanceId: line.instance_id,
    files: dedupePaths(line.found_files),
    ...(modules === undefined ? {} : { modules }),
    ...(functions === undefined ? {} : { functions }),
  };
}

/** The same prediction with every ranked list cut to its first k entries. */
export function cutPrediction(prediction: Prediction, k: number): Prediction {
  return {
    instanceId: prediction.instanceId,
    files: topK(prediction.files, k),
    ...(prediction.modules === undefined ? {} : { modules: topK(prediction.modules, k) }),
    ...(prediction.functions === undefined ? {} : { functions: topK(prediction.functions, k) }),
  };
}

function describeIssues(error: { issues: readonly { path: readonly PropertyKey[]; message: string }[] }): string {
  return error.issues
    .map((issue) => `${issue.path.length === 0 ? '(line)' : issue.path.map(String).join('.')}: ${issue.message}`)
    .join('; ');
}

/** Parses predictions from JSONL text lines. */
export async function parsePredictionLines(
  lines: AsyncIterable<string> | Iterable<string>,
  opts: ReadPredictionsOptions = {},
): Promise<PredictionsFile> {
  if (opts.topK !== undefined && (!Number.isInteger(opts.topK) || opts.topK < 1)) {
    throw new RangeError(`topK must be a positive integer, got ${opts.topK}`);
  }
  const predictions: Prediction[] = [];
  const errors: PredictionLineError[] = [];
  const firstLineOf = new Map<string, number>();
  let lineNumber = 0;
  let blankLines = 0;
  for await (const text of lines) {
    lineNumber++;
    if (text.trim() === '') {
      blankLines++;
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      errors.push({ line: lineNumber, message: `invalid JSON: ${(error as Error).message}` });
      continue;
    }
    const parsed = PredictionLineSchema.safeParse(json);
    if (!parsed.success) {
      errors.push({ line: lineNumber, message: describeIssues(parsed.error) });
      continue;
    }
    const id = parsed.data.instance_id;
    const first = firstLineOf.get(id);
    if (first !== undefined) {
      errors.push({ line: lineNumber, message: `duplicate instance_id ${JSON.stringify(id)} (first on line ${first}); ignored` });
      continue;
    }
    firstLineOf.set(id, lineNumber);
    const prediction = toPrediction(parsed.data);
    predictions.push(opts.topK === undefined ? prediction : cutPrediction(prediction, opts.topK));
  }
  return { predictions, errors, linesRead: lineNumber, blankLines };
}

/** Reads a predictions JSONL file. Throws only when the file itself cannot be read. */
export async function readPredictionsFile(file: string, opts: ReadPredictionsOptions = {}): Promise<PredictionsFile> {
  const stream = createReadStream(file, { encoding: 'utf8' });
  const opened = new Promise<void>((resolve, reject) => {
    stream.once('open', () => resolve());
    stream.once('error', (error) => reject(new Error(`cannot read predictions file ${JSON.stringify(file)}: ${error.message}`)));
  });
  await opened;
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  try {
    return await parsePredictionLines(lines, opts);
  } catch (error) {
    throw new Error(`cannot read predictions file ${JSON.stringify(file)}: ${(error as Error).message}`, { cause: error });
  }
}
