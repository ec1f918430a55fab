import { z } from 'zod';

/**
 * One line of a retrieval predictions file (JSONL), as LocAgent-style systems write them: an instance id and
 * ranked lists, best first. `found_files` is required; `found_modules` (`file.py:Class`) and
 * `found_entities` (`file.py:Class.method`, `file.py:func`) are optional. Unknown keys (raw model output,
 * metadata) are allowed and ignored. A null list is read as absent.
 */
const rankedList = z.array(z.string());
const optionalRankedList = rankedList.nullish().transform((v) => v ?? undefined);

export const PredictionLineSchema = z.object({
  instance_id: z.string().trim().min(1, 'instance_id must be a non-empty string'),
  found_files: rankedList,
  found_modules: optionalRankedList,
  found_entities: optionalRankedList,
});
export type PredictionLine = z.infer<typeof PredictionLineSchema>;

/** A prediction after normalisation: paths and entity ids normalised, repeats dropped, rank order kept. */
export const PredictionSchema = z.object({
  instanceId: z.string().min(1),
  files: z.array(z.string().min(1)),
  /** Absent when the line had neither modules nor entities to derive them from. */
  modules: z.array(z.string().min(1)).optional(),
  functions: z.array(z.string().min(1)).optional(),
});
export type Prediction = z.infer<typeof PredictionSchema>;
