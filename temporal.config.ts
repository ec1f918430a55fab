/**
 * The single place for how codegrep talks to Temporal: address, namespace, task queues, search attributes,
 * activity timeouts and retry policies. Every value can be overridden by an environment variable so the
 * same code runs against the embedded dev server, a shared cluster or Temporal Cloud.
 *
 * This file is imported by workflow code too, so it must stay free of Node APIs other than the guarded
 * `process.env` read below (workflows only read the constant parts, never the env-derived ones).
 */

const env: Record<string, string | undefined> = typeof process !== 'undefined' && process.env ? process.env : {};

function envString(name: string, fallback: string): string {
  const value = env[name];
  return value && value.trim() !== '' ? value.trim() : fallback;
}

function envOptional(name: string): string | undefined {
  const value = env[name];
  return value && value.trim() !== '' ? value.trim() : undefined;
}

/** `1/true/yes/on` or `0/false/no/off`; unset is undefined (the default applies). */
function envFlag(name: string): boolean | undefined {
  const raw = envOptional(name);
  if (raw === undefined) return undefined;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new Error(`environment variable ${name}="${raw}" is not a boolean (1/true/yes/on or 0/false/no/off)`);
}

function envNumber(name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const parsed = Number(raw);
  if (!Number.isFinite(parsed) || parsed < 0) {
    throw new Error(`environment variable ${name}="${raw}" is not a non-negative number`);
  }
  return parsed;
}

export const temporalConfig = {
  address: envString('CODEGREP_TEMPORAL_ADDRESS', 'localhost:7233'),
  namespace: envString('CODEGREP_NAMESPACE', 'codegrep'),
  uiPort: envNumber('CODEGREP_UI_PORT', 8233),
  /**
   * How workers, the CLI and schedules authenticate to a secured cluster (workers/connection.ts reads the files
   * and connects). TLS is on when CODEGREP_TEMPORAL_TLS=1 or any of the options below is set (an API key
   * implies TLS, as Temporal Cloud needs); CODEGREP_TEMPORAL_TLS=0 forces plaintext (e.g. an API key checked
   * by a plaintext proxy on a private network).
   *  - serverName: the name the server's certificate must carry when it differs from the address's host (SNI).
   *  - caFile: PEM CA that signed the server's certificate (default: the system's trusted roots).
   *  - certFile + keyFile: the client certificate and key for mTLS (self-hosted clusters, Cloud mTLS namespaces).
   *  - apiKey: sent as `authorization: Bearer <key>` on every call (Temporal Cloud API keys).
   */
  security: {
    tls: envFlag('CODEGREP_TEMPORAL_TLS'),
    serverName: envOptional('CODEGREP_TEMPORAL_SERVER_NAME'),
    caFile: envOptional('CODEGREP_TEMPORAL_TLS_CA'),
    certFile: envOptional('CODEGREP_TEMPORAL_TLS_CERT'),
    keyFile: envOptional('CODEGREP_TEMPORAL_TLS_KEY'),
    apiKey: envOptional('CODEGREP_TEMPORAL_API_KEY'),
  },
  get uiUrl(): string {
    return envString('CODEGREP_UI_URL', `http://localhost:${this.uiPort}`);
  },
  taskQueues: {
    cpu: envString('CODEGREP_TASK_QUEUE', 'codegrep'),
    gpu: envString('CODEGREP_GPU_TASK_QUEUE', 'codegrep-gpu'),
  },
  /** Registered by `codegrep server` (and `.ci/run`); all Keyword. */
  searchAttributes: {
    run: 'CodegrepRun',
    stage: 'CodegrepStage',
    recipe: 'CodegrepRecipe',
  },
  worker: {
    shutdownGraceTimeMs: envNumber('CODEGREP_SHUTDOWN_GRACE_MS', 10_000),
    maxConcurrentActivities: envNumber('CODEGREP_MAX_ACTIVITIES', 8),
  },
} as const;

/**
 * One stage's activity timeouts (milliseconds): `CODEGREP_<STAGE>_TIMEOUT_MS` overrides the start-to-close
 * default, `CODEGREP_<STAGE>_HEARTBEAT_MS` the heartbeat one.
 */
function stageTimeouts(
  stage: string,
  startToCloseMs: number,
  heartbeatMs: number,
): { readonly startToCloseMs: number; readonly heartbeatMs: number } {
  return {
    startToCloseMs: envNumber(`CODEGREP_${stage}_TIMEOUT_MS`, startToCloseMs),
    heartbeatMs: envNumber(`CODEGREP_${stage}_HEARTBEAT_MS`, heartbeatMs),
  };
}

/** Activity timeouts (milliseconds) per stage. Heartbeat timeouts are what detects a killed worker. */
export const activityTimeouts = {
  mine: stageTimeouts('MINE', 2 * 60 * 60_000, 60_000),
  judge: stageTimeouts('JUDGE', 24 * 60 * 60_000, 30_000),
  weight: stageTimeouts('WEIGHT', 60 * 60_000, 60_000),
  worktrees: stageTimeouts('WORKTREES', 6 * 60 * 60_000, 120_000),
  /**
   * Downstream plan and summary. Each (configuration, instance) run's limit is the config's
   * `downstream.runTimeoutMs`; its heartbeat timeout is this one's.
   */
  downstream: stageTimeouts('DOWNSTREAM', 60 * 60_000, 60_000),
  /** One evaluation shard (retriever × instances), and the evaluation's summary. */
  evaluation: stageTimeouts('EVALUATION', 6 * 60 * 60_000, 60_000),
  /**
   * One training segment on the GPU worker (model loading + segmentSteps steps). The activity heartbeats on
   * a timer while its trainer runs, so the heartbeat timeout is what detects a killed GPU worker.
   */
  training: stageTimeouts('TRAINING', 24 * 60 * 60_000, 60_000),
  /**
   * A policy server on the GPU worker (lib/policy-server): it runs as long as the stage it serves, so its
   * start-to-close is long; its heartbeat timeout is what stops a server whose worker died (the retry reaps it).
   */
  policyServer: stageTimeouts('POLICY_SERVER', 3 * 24 * 60 * 60_000, 30_000),
  short: stageTimeouts('SHORT', 10 * 60_000, 60_000),
} as const;

/**
 * Retry policy shared by activities. Errors that cannot succeed on retry (bad input, auth failures) are
 * thrown as non-retryable ApplicationFailures with one of these types.
 *
 * Constants, not environment variables: workflow code builds the activity options and has no `process.env`,
 * and a retry policy that changed with the environment of whichever process bundled the workflow would make
 * the same workflow retry differently on two workers. What differs between machines (timeouts) reaches the
 * workflows through the run config's `temporal` section instead.
 */
export const retryPolicy = {
  initialIntervalMs: 1_000,
  backoffCoefficient: 2,
  maximumIntervalMs: 60_000,
  maximumAttempts: 10,
  nonRetryableErrorTypes: ['InvalidInput', 'AuthenticationFailed', 'ConfigError'] as string[],
};

export type TemporalConfig = typeof temporalConfig;
