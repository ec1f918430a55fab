import { z } from 'zod';
import { bool, columns, float64, int32, list, nullable, struct, utf8 } from '../columns';
import { RetrieverKindSchema } from './config';

/**
 * The evaluation's row artifacts: per-shard rows (prediction + scores), and the merged predictions and
 * per-instance metrics. Each has one column list (schemas/columns.ts) giving its Arrow schema and zod row schema.
 */

const idColumns = { instanceId: utf8(z.string().min(1)), retriever: utf8(z.string().min(1)), kind: utf8(RetrieverKindSchema) };

/**
 * One instance's prediction by one retriever. `files` is the set scored; `ranked` the ranked file list Acc@k
 * reads (null for retrievers that do not rank). Lists a retriever does not produce are null, not empty, so a
 * level it never predicts is not scored as "predicted nothing". A failed prediction has `error` set and
 * empty lists: it is scored as predicting nothing.
 */
const predictionColumns = {
  files: list(utf8()),
  ranked: nullable(list(utf8())),
  lineRanges: nullable(list(struct({ path: utf8(), start: int32(), end: int32() }))),
  modules: nullable(list(utf8())),
  functions: nullable(list(utf8())),
  turns: nullable(int32()),
  toolCalls: nullable(int32()),
  promptTokens: nullable(int32()),
  completionTokens: nullable(int32()),
  answerValid: nullable(bool()),
  endReason: nullable(utf8()),
  error: nullable(utf8()),
  ms: float64(),
  /**
   * A trained policy's prediction (agent retriever with `policy`): the served model name
   * (`<runId>/step-NNNNNNNN`), the base model, the checkpoint's step and its adapter's sha256. Null otherwise.
   */
  servedModel: nullable(utf8()),
  baseModel: nullable(utf8()),
  checkpointStep: nullable(int32()),
  adapterSha256: nullable(utf8()),
};

/** One instance's scores by one retriever (CodeGrep §4.2 / App. B; CodeScout §4.2; Acc@k CodeScout App. G). */
const scoreColumns = {
  goldFiles: int32(),
  predictedFiles: int32(),
  filePrecision: float64(),
  fileRecall: float64(),
  fileFBeta: float64(),
  fileF1: float64(),
  lineRangeFBeta: nullable(float64()),
  modulePrecision: nullable(float64()),
  moduleRecall: nullable(float64()),
  moduleF1: nullable(float64()),
  functionPrecision: nullable(float64()),
  functionRecall: nullable(float64()),
  functionF1: nullable(float64()),
  accAt1: nullable(float64()),
  accAt3: nullable(float64()),
  accAt5: nullable(float64()),
};

export const evaluationPredictionColumns = columns({ ...idColumns, ...predictionColumns });
export const EvaluationPredictionSchema = evaluationPredictionColumns.zod;
export type EvaluationPrediction = z.infer<typeof EvaluationPredictionSchema>;

/** The metrics artifact repeats `turns` and `toolCalls` from the prediction (Table 2's Turns column). */
export const instanceMetricColumns = columns({
  ...idColumns,
  ...scoreColumns,
  turns: nullable(int32()),
  toolCalls: nullable(int32()),
  failed: bool(),
});
export const InstanceMetricsSchema = instanceMetricColumns.zod;
export type InstanceMetrics = z.infer<typeof InstanceMetricsSchema>;

/** A shard holds both: one row per (retriever, instance) with its prediction and its scores. */
export const evaluationShardColumns = columns({ ...idColumns, ...predictionColumns, ...scoreColumns, failed: bool() });
export const EvaluationShardRowSchema = evaluationShardColumns.zod;
export type EvaluationShardRow = z.infer<typeof EvaluationShardRowSchema>;

export const EVALUATION_SHARD_SCHEMA_NAME = 'evaluation.shard';
export const EVALUATION_PREDICTIONS_SCHEMA_NAME = 'evaluation.predictions';
export const EVALUATION_METRICS_SCHEMA_NAME = 'evaluation.metrics';
export const EVALUATION_SUMMARY_SCHEMA_NAME = 'evaluation.summary';
/** 2: the served checkpoint's columns (servedModel, baseModel, checkpointStep, adapterSha256). */
export const EVALUATION_SCHEMA_VERSION = 2;

export const evaluationPredictionsArrowSchema = evaluationPredictionColumns.arrowSchema();
export const instanceMetricsArrowSchema = instanceMetricColumns.arrowSchema();
export const evaluationShardArrowSchema = evaluationShardColumns.arrowSchema();

export const PREDICTION_COLUMNS = evaluationPredictionsArrowSchema.fields.map((f) => f.name);
export const METRIC_COLUMNS = instanceMetricsArrowSchema.fields.map((f) => f.name);
