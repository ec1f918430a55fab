import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ArtifactStoreError, StoreConfigError, s3SettingsFromEnv, storeSettingsFromEnv } from './index';

describe('store settings from an environment', () => {
  it('reads the standard AWS variables, leaving unset ones to the SDK', () => {
    expect(s3SettingsFromEnv({})).toEqual({});
    expect(
      s3SettingsFromEnv({
        AWS_ENDPOINT_URL: 'http://fallback:8333',
        AWS_ENDPOINT_URL_S3: 'http://seaweed:8333',
        AWS_S3_FORCE_PATH_STYLE: 'TRUE',
        AWS_MAX_ATTEMPTS: '4',
      }),
    ).toEqual({ endpoint: 'http://seaweed:8333', region: 'us-east-1', forcePathStyle: true, maxAttempts: 4 });
    expect(s3SettingsFromEnv({ AWS_DEFAULT_REGION: 'eu-west-1', AWS_S3_FORCE_PATH_STYLE: 'no', AWS_MAX_ATTEMPTS: '0' })).toEqual({
      region: 'eu-west-1',
      forcePathStyle: false,
    });
  });

  it('takes the cache dir from CODEGREP_ARTIFACT_CACHE, else under the home directory', () => {
    expect(storeSettingsFromEnv({ CODEGREP_ARTIFACT_CACHE: 'rel/cache' }).cacheDir).toBe(path.resolve('rel/cache'));
    expect(storeSettingsFromEnv({})).toEqual({ s3: {}, cacheDir: path.join(os.homedir(), '.cache', 'codegrep', 'artifacts') });
  });
});

describe('store errors', () => {
  it('are named after their class', () => {
    const error = new StoreConfigError('s3://b/p', 'bad');
    expect(error).toBeInstanceOf(ArtifactStoreError);
    expect([error.name, error.uri, error.message]).toEqual(['StoreConfigError', 's3://b/p', 'bad']);
    expect(new ArtifactStoreError('file:///x', 'down').name).toBe('ArtifactStoreError');
  });
});
