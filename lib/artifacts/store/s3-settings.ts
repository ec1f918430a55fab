import type { S3ClientConfig } from '@aws-sdk/client-s3';

/** An environment as a worker or the CLI read it (`process.env`, or the frozen copy activities get). */
export type Environment = Readonly<Record<string, string | undefined>>;

/**
 * Connection settings of an `s3://` store. Unset fields come from the standard AWS configuration, so the
 * same code runs against AWS S3 and any S3-compatible server:
 *   endpoint        AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL (unset: AWS S3 itself)
 *   region          AWS_REGION / AWS_DEFAULT_REGION / the profile's region (us-east-1 for a custom endpoint)
 *   forcePathStyle  AWS_S3_FORCE_PATH_STYLE=true (most S3-compatible servers want path-style URLs)
 *   credentials     AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, or AWS_PROFILE from
 *                   ~/.aws/credentials, or instance/container roles: the SDK's default chain
 */
export interface S3StoreSettings {
  endpoint?: string;
  region?: string;
  forcePathStyle?: boolean;
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Attempts per request (AWS_MAX_ATTEMPTS; the SDK default is 3). */
  maxAttempts?: number;
  /** Multipart part size for uploads; memory per upload is about partSize × queueSize. */
  partSizeBytes?: number;
}

/** The settings the AWS variables of `env` give; credentials stay to the SDK's default chain. */
export function s3SettingsFromEnv(env: Environment): S3StoreSettings {
  const endpoint = env.AWS_ENDPOINT_URL_S3 || env.AWS_ENDPOINT_URL || undefined;
  const region = env.AWS_REGION || env.AWS_DEFAULT_REGION || (endpoint ? 'us-east-1' : undefined);
  const pathStyle = env.AWS_S3_FORCE_PATH_STYLE;
  const attempts = env.AWS_MAX_ATTEMPTS ? Number(env.AWS_MAX_ATTEMPTS) : undefined;
  return {
    ...(endpoint ? { endpoint } : {}),
    ...(region ? { region } : {}),
    ...(pathStyle !== undefined ? { forcePathStyle: /^(1|true|yes)$/i.test(pathStyle) } : {}),
    ...(attempts !== undefined && Number.isInteger(attempts) && attempts > 0 ? { maxAttempts: attempts } : {}),
  };
}

/** The S3 client's configuration: only the settings given, so the SDK's own defaults fill the rest. */
export function s3ClientConfig(settings: S3StoreSettings): S3ClientConfig {
  return {
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    ...(settings.region ? { region: settings.region } : {}),
    ...(settings.forcePathStyle !== undefined ? { forcePathStyle: settings.forcePathStyle } : {}),
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
    ...(settings.maxAttempts ? { maxAttempts: settings.maxAttempts } : {}),
  };
}

/** How error messages name the server: its endpoint, or AWS S3 in its region. */
export function describeEndpoint(settings: S3StoreSettings): string {
  return settings.endpoint ?? `AWS S3 (${settings.region ?? 'default region'})`;
}
