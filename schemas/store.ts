import { z } from 'zod';
import { RepoSourceSchema } from './worktrees';

/**
 * The artifact store a run shares between its machines (README "Deployment: several machines"): `s3://bucket/prefix` (any S3-compatible
 * object store) or `file:///abs/dir` (one machine, or a shared mount). The run's objects live under
 * `<store>/<runId>/…`. Pure zod: safe to import from workflow code.
 */
export const StoreUriSchema = z
  .string()
  .regex(
    /^(s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?|file:\/\/\/.+)$/,
    'use s3://<bucket>/<prefix> (bucket: 3-63 characters a-z, 0-9, ".", "-") or file:///<absolute dir>',
  )
  .refine(
    (uri) =>
      !uri
        .split('/')
        .slice(3)
        .some((part) => part === '.' || part === '..'),
    'the prefix may not contain . or .. segments',
  );
export type StoreUri = z.infer<typeof StoreUriSchema>;

/**
 * What a training segment needs to run shared-nothing on a GPU node: the store (samples, checkpoints, logs and
 * metrics go through it) and where to materialize the samples' worktrees from (the environment's repoSource).
 */
export const SegmentStoreSchema = z.object({
  uri: StoreUriSchema,
  repoSource: RepoSourceSchema,
});
export type SegmentStore = z.infer<typeof SegmentStoreSchema>;
