import { resolveConfig, type ResolvedConfig } from '../lib/config';
import { ConfigError } from '../schemas/config';
import { configError } from './kit';

export type { ResolvedConfig } from '../lib/config';

/**
 * Validates the run config and resolves its paths (lib/config). Runs as the first activity of every workflow so
 * `temporal workflow start --input-file` gets the same checks as `codegrep run`; a bad config fails at once
 * (non-retryable) naming each bad field.
 */
export async function validateConfig(input: unknown): Promise<ResolvedConfig> {
  try {
    return resolveConfig(input, 'workflow input');
  } catch (error) {
    if (error instanceof ConfigError) throw configError(error.message);
    throw error;
  }
}
