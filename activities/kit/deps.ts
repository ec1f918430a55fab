import type { Client } from '@temporalio/client';
import { openArtifactStore, storeSettingsFromEnv, type ArtifactStore, type StoreSettings } from '../../lib/artifacts/store';
import { stderrLogger, type FallbackLogger } from './activity-log';

/**
 * What activities get from the worker that runs them, read once when the worker starts (workers/create-worker.ts)
 * and handed to `createActivities(deps)` (activities/index.ts), the dependency-injection idiom of Temporal's
 * TypeScript samples (`activities-dependency-injection`). Activities read nothing of this from module state or
 * `process.env`, so a test builds them with a temp data dir and no client and sees exactly what they do.
 *
 * A run's artifact store is named by the run's config, so each activity opens it from its input, with the
 * settings here (`openRunStore`): how this node reaches S3 and where it caches downloads.
 */
export interface ActivityDeps {
  /** The worker's Temporal client, to signal workflows (training progress, a policy server's endpoint); null in a test without a server: progress is then only heartbeated. */
  client: Client | null;
  /**
   * This node's own data dir (README "Deployment: several machines"): with a run store, the policy server and its
   * reaper work in `<nodeDataDir>/<runId>`. Null: they use the run directory the workflow names (a shared mount).
   */
  nodeDataDir: string | null;
  /** The environment as the worker read it at start: the API keys a config names by variable (`apiKeyEnv`). */
  env: Readonly<Record<string, string | undefined>>;
  /** Where an activity's lines go once it has ended (activities/kit/activity-log.ts): the worker's own logger. */
  logger: FallbackLogger;
  /** How this node reaches artifact stores (S3 endpoint and credentials) and caches their objects, from `env`. */
  store: StoreSettings;
}

/**
 * Deps with these fields set and the rest empty: no client, no node data dir, no environment, late lines to
 * stderr, and the store settings of the given environment.
 */
export function activityDeps(deps: Partial<ActivityDeps> = {}): ActivityDeps {
  const env = deps.env ?? {};
  return { client: null, nodeDataDir: null, env, logger: stderrLogger, store: storeSettingsFromEnv(env), ...deps };
}

/** The run's artifact store (its URI from the activity's input), reached with the worker's store settings. */
export function openRunStore(deps: Pick<ActivityDeps, 'store'>, uri: string): ArtifactStore {
  return openArtifactStore(uri, deps.store.s3);
}
