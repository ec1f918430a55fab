import type { StoreSettings } from './settings';
/**
 * What the row readers need from the store, without loading the AWS SDK until a store URI is actually read
 * (most reads are plain local paths).
 */
export function isStoreUri(uri: string): boolean {
  return uri.startsWith('s3://') || uri.startsWith('file://');
}

export async function localPathForUri(uri: string, settings?: StoreSettings): Promise<string> {
  const store = await import('./index');
  return store.localPathForUri(uri, settings);
}
