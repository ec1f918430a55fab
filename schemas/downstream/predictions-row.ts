import { z } from 'zod';

/**
 * What the downstream stage reads from a predictions Parquet file: the instance and its ranked files. The
 * evaluation stage writes `agent.predictions` rows (schemas/agent.ts: instanceId, retriever, files, …);
 * LocAgent-style column names (instance_id, found_files) are accepted too. Other columns are ignored.
 */
export const PredictionsParquetRowSchema = z
  .object({
    instanceId: z.string().min(1).optional(),
    instance_id: z.string().min(1).optional(),
    retriever: z.string().nullish(),
    files: z.array(z.string()).nullish(),
    found_files: z.array(z.string()).nullish(),
    // A trained policy's rows name the checkpoint that answered (schemas/evaluation/rows.ts).
    servedModel: z.string().nullish(),
    baseModel: z.string().nullish(),
    checkpointStep: z.number().int().nullish(),
    adapterSha256: z.string().nullish(),
  })
  .transform((row, ctx) => {
    const instanceId = row.instanceId ?? row.instance_id;
    const files = row.files ?? row.found_files;
    if (instanceId === undefined) ctx.addIssue({ code: 'custom', message: 'has no instanceId (or instance_id) column value' });
    if (files === undefined || files === null) ctx.addIssue({ code: 'custom', message: 'has no files (or found_files) list' });
    const policy =
      row.adapterSha256 && row.servedModel && row.checkpointStep !== null && row.checkpointStep !== undefined
        ? { model: row.servedModel, baseModel: row.baseModel ?? '', step: row.checkpointStep, adapterSha256: row.adapterSha256 }
        : null;
    return { instanceId: instanceId ?? '', retriever: row.retriever ?? null, files: files ?? [], policy };
  });
