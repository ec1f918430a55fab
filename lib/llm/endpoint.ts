import { z } from 'zod';

/**
 * Where an OpenAI-compatible Chat Completions server lives (vLLM, SGLang, OpenAI …) and which model to ask.
 * `apiKey` may be omitted for local servers that check none.
 */
export const LlmEndpointSchema = z.object({
  baseUrl: z.url({ protocol: /^https?$/, error: 'baseUrl must be an http(s) URL such as http://127.0.0.1:8000/v1' }),
  model: z.string().trim().min(1, 'model must name the served model'),
  apiKey: z.string().min(1).optional(),
});
export type LlmEndpoint = z.infer<typeof LlmEndpointSchema>;
