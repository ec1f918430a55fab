import os from 'node:os';
import path from 'node:path';
import { s3SettingsFromEnv, type Environment, type S3StoreSettings } from './s3-settings';

/** What the store code takes from a node's environment: read once by the entry point and passed down. */
export interface StoreSettings {
  /** How to reach `s3://` stores. */
  s3: S3StoreSettings;
  /** Where this node keeps its local copies of stored objects. */
  cacheDir: string;
}

/** Where this node keeps downloaded artifacts: CODEGREP_ARTIFACT_CACHE, else ~/.cache/codegrep/artifacts. */
export function defaultLocalCacheDir(env: Environment): string {
  return path.resolve(env.CODEGREP_ARTIFACT_CACHE || path.join(os.homedir(), '.cache', 'codegrep', 'artifacts'));
}

/** The store settings an environment gives (a worker's `deps.env`, the CLI's `process.env`). */
export function storeSettingsFromEnv(env: Environment): StoreSettings {
  return { s3: s3SettingsFromEnv(env), cacheDir: defaultLocalCacheDir(env) };
}

/**
 * The store settings of this process's environment as it is now. For entry points, and the default of the
 * store functions whose callers pass no settings (the row readers, a store opened from a URI alone).
 */
export function storeSettingsFromProcessEnv(): StoreSettings {
  return storeSettingsFromEnv(process.env);
}
