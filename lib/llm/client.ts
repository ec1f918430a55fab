import OpenAI from 'openai';
import { LlmEndpointSchema, type LlmEndpoint } from './endpoint';

/** Environment variables read when a config leaves a field out: `<prefix>_BASE_URL`, `_MODEL`, `_API_KEY`. */
export const DEFAULT_LLM_ENV_PREFIX = 'CODEGREP_LLM';

/** Sent when no key is configured: local vLLM/SGLang servers accept anything, and the SDK insists on one. */
export const NO_API_KEY = 'none';

/**
 * The endpoint to use, from `config` first and the environment second, or null when neither names a base URL
 * (the stage then runs its documented offline mode). A base URL without a model, or a malformed URL, is a
 * configuration error that names where the value came from.
 */
export function resolveLlmEndpoint(
  config: Partial<LlmEndpoint> | undefined,
  env: Record<string, string | undefined> = process.env,
  envPrefix: string = DEFAULT_LLM_ENV_PREFIX,
): LlmEndpoint | null {
  const fromEnv = (suffix: string) => {
    const value = env[`${envPrefix}_${suffix}`]?.trim();
    return value === '' ? undefined : value;
  };
  const baseUrl = config?.baseUrl ?? fromEnv('BASE_URL');
  if (baseUrl === undefined) return null;
  const candidate = {
    baseUrl,
    model: config?.model ?? fromEnv('MODEL'),
    apiKey: config?.apiKey ?? fromEnv('API_KEY'),
  };
  const parsed = LlmEndpointSchema.safeParse(candidate);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .map((issue) => {
        const field = String(issue.path[0] ?? '');
        const envName = `${envPrefix}_${field === 'baseUrl' ? 'BASE_URL' : field === 'apiKey' ? 'API_KEY' : 'MODEL'}`;
        return `${field} (config or ${envName}): ${issue.message}`;
      })
      .join('; ');
    throw new Error(`LLM endpoint configuration is invalid: ${problems}`);
  }
  return parsed.data;
}

export interface LlmClient {
  openai: OpenAI;
  endpoint: LlmEndpoint;
}

/**
 * An `openai` client for the endpoint with the SDK's own retries disabled: retry.ts owns the policy (its header
 * says what the SDK's retries lack), so every attempt is counted and reported.
 */
export function createLlmClient(endpoint: LlmEndpoint): LlmClient {
  const checked = LlmEndpointSchema.parse(endpoint);
  const openai = new OpenAI({
    baseURL: checked.baseUrl,
    apiKey: checked.apiKey ?? NO_API_KEY,
    maxRetries: 0,
  });
  return { openai, endpoint: checked };
}
