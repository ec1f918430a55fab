import { describe, expect, it } from 'vitest';
import { createLlmClient, NO_API_KEY, resolveLlmEndpoint } from './client';

describe('resolveLlmEndpoint', () => {
  it('returns null when neither config nor environment names a base URL (offline mode)', () => {
    expect(resolveLlmEndpoint(undefined, {})).toBeNull();
    expect(resolveLlmEndpoint({ model: 'x' }, { CODEGREP_LLM_BASE_URL: '  ' })).toBeNull();
  });

  it('reads CODEGREP_LLM_* and lets the config override each field', () => {
    const env = { CODEGREP_LLM_BASE_URL: 'http://127.0.0.1:8000/v1', CODEGREP_LLM_MODEL: 'glm', CODEGREP_LLM_API_KEY: 'sk-env' };
    expect(resolveLlmEndpoint(undefined, env)).toEqual({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'glm', apiKey: 'sk-env' });
    expect(resolveLlmEndpoint({ model: 'qwen' }, env)).toEqual({ baseUrl: 'http://127.0.0.1:8000/v1', model: 'qwen', apiKey: 'sk-env' });
    expect(resolveLlmEndpoint(undefined, { AGENT_BASE_URL: 'http://h/v1', AGENT_MODEL: 'a' }, 'AGENT')).toEqual({
      baseUrl: 'http://h/v1',
      model: 'a',
    });
  });

  it('names the missing model and the malformed URL with where they come from', () => {
    expect(() => resolveLlmEndpoint(undefined, { CODEGREP_LLM_BASE_URL: 'http://h/v1' })).toThrow(/model \(config or CODEGREP_LLM_MODEL\)/);
    expect(() => resolveLlmEndpoint({ baseUrl: 'localhost:8000', model: 'm' }, {})).toThrow(
      /baseUrl \(config or CODEGREP_LLM_BASE_URL\): baseUrl must be an http\(s\) URL/,
    );
  });
});

describe('createLlmClient', () => {
  it("disables the SDK's retries and sends a placeholder key when none is configured", () => {
    const { openai, endpoint } = createLlmClient({ baseUrl: 'http://127.0.0.1:1/v1', model: 'm' });
    expect(openai.maxRetries).toBe(0);
    expect(openai.apiKey).toBe(NO_API_KEY);
    expect(openai.baseURL).toBe('http://127.0.0.1:1/v1');
    expect(endpoint.model).toBe('m');
  });
});
