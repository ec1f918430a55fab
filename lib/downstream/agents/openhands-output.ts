import type { ChatMessage, WireToolCall } from '../../../schemas/agent';

/**
 * Reads what an OpenHands SWE-bench run leaves behind: a line of `output.jsonl` (OpenHands' `EvalOutput`:
 * `instance_id`, `test_result.git_patch`, `history` (serialised events), `metrics`, `error`) — or the
 * trajectory JSON of one run, which has the same `history`/`metrics` keys — or the newer OpenHands
 * benchmarks' standardised line (`cost.input_tokens/output_tokens`, no history).
 *
 * Counters, most precise source first:
 * - rounds = model calls: the length of `metrics.token_usages` (one entry per LLM response); else
 *   `metrics.response_latencies`; else the distinct `tool_call_metadata.model_response.id`s of agent
 *   actions; else the number of agent actions in the history.
 * - tokens: `metrics.accumulated_token_usage.prompt_tokens/completion_tokens`; else the sum over
 *   `metrics.token_usages`; else `cost.input_tokens/output_tokens`.
 */
export interface OpenHandsRunSummary {
  instanceId: string | null;
  /** `test_result.git_patch`; null when the output has none. */
  gitPatch: string | null;
  rounds: number;
  inputTokens: number;
  outputTokens: number;
  /** Where the counters came from, for the log. */
  countSource: string;
  error: string | null;
  /** The agent called `finish` (AgentFinishAction). */
  finished: boolean;
  /** The last agent action was a message to the user (no tool call). */
  endedWithMessage: boolean;
  trajectory: ChatMessage[];
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** Old OpenHands outputs store the history as [action, observation] pairs; newer ones as a flat event list. */
function flattenHistory(history: unknown): Json[] {
  if (!Array.isArray(history)) return [];
  const events: Json[] = [];
  for (const item of history) {
    if (Array.isArray(item)) events.push(...item.filter(isObject));
    else if (isObject(item)) events.push(item);
  }
  return events;
}

const isAgentAction = (e: Json) => e.source === 'agent' && typeof e.action === 'string' && e.action !== 'system';

function argsOf(e: Json): Json {
  return isObject(e.args) ? e.args : {};
}

function toolCallOf(e: Json, index: number): WireToolCall {
  const meta = isObject(e.tool_call_metadata) ? e.tool_call_metadata : {};
  return {
    id: str(meta.tool_call_id) ?? `openhands_${index}`,
    type: 'function',
    function: { name: str(meta.function_name) ?? String(e.action), arguments: JSON.stringify(argsOf(e)) },
  };
}

/** OpenHands events as chat messages (best effort: enough to read the trajectory, not to replay it). */
export function historyToMessages(history: unknown): ChatMessage[] {
  const messages: ChatMessage[] = [];
  let lastCallId: string | null = null;
  flattenHistory(history).forEach((e, index) => {
    const args = argsOf(e);
    if (e.action === 'system') {
      messages.push({ role: 'system', content: str(args.content) ?? str(e.message) ?? '' });
    } else if (typeof e.action === 'string' && e.source === 'user') {
      if (e.action === 'message') messages.push({ role: 'user', content: str(args.content) ?? str(e.message) ?? '' });
    } else if (typeof e.action === 'string' && e.source === 'agent') {
      const thought = str(args.thought) ?? '';
      if (e.action === 'message') {
        messages.push({ role: 'assistant', content: str(args.content) ?? str(e.message) ?? thought });
      } else {
        const call = toolCallOf(e, index);
        lastCallId = call.id;
        messages.push({ role: 'assistant', content: thought, tool_calls: [call] });
      }
    } else if (typeof e.observation === 'string') {
      const meta = isObject(e.tool_call_metadata) ? e.tool_call_metadata : {};
      const id = str(meta.tool_call_id) ?? lastCallId;
      if (id === null) return; // an observation not caused by an agent call (e.g. the initial environment state)
      messages.push({ role: 'tool', tool_call_id: id, name: e.observation, content: str(e.content) ?? str(e.message) ?? '' });
    }
  });
  return messages;
}

export function summarizeOpenHandsOutput(record: Json): OpenHandsRunSummary {
  const metrics = isObject(record.metrics) ? record.metrics : {};
  const cost = isObject(record.cost) ? record.cost : {};
  const events = flattenHistory(record.history);
  const agentActions = events.filter(isAgentAction);

  const tokenUsages = Array.isArray(metrics.token_usages) ? metrics.token_usages.filter(isObject) : [];
  const latencies = Array.isArray(metrics.response_latencies) ? metrics.response_latencies : [];
  const responseIds = new Set(
    agentActions
      .map((e) =>
        isObject(e.tool_call_metadata) && isObject(e.tool_call_metadata.model_response)
          ? str(e.tool_call_metadata.model_response.id)
          : null,
      )
      .filter((id): id is string => id !== null),
  );
  const sources: string[] = [];
  let rounds: number;
  if (tokenUsages.length > 0) {
    rounds = tokenUsages.length;
    sources.push('rounds: metrics.token_usages');
  } else if (latencies.length > 0) {
    rounds = latencies.length;
    sources.push('rounds: metrics.response_latencies');
  } else if (responseIds.size > 0) {
    rounds = responseIds.size;
    sources.push('rounds: distinct model_response ids');
  } else {
    rounds = agentActions.length;
    sources.push('rounds: agent actions in history');
  }

  const accumulated = isObject(metrics.accumulated_token_usage) ? metrics.accumulated_token_usage : null;
  let inputTokens: number;
  let outputTokens: number;
  if (accumulated && num(accumulated.prompt_tokens) !== null) {
    inputTokens = num(accumulated.prompt_tokens)!;
    outputTokens = num(accumulated.completion_tokens) ?? 0;
    sources.push('tokens: metrics.accumulated_token_usage');
  } else if (tokenUsages.length > 0) {
    inputTokens = tokenUsages.reduce((s, u) => s + (num(u.prompt_tokens) ?? 0), 0);
    outputTokens = tokenUsages.reduce((s, u) => s + (num(u.completion_tokens) ?? 0), 0);
    sources.push('tokens: sum of metrics.token_usages');
  } else {
    inputTokens = num(cost.input_tokens) ?? 0;
    outputTokens = num(cost.output_tokens) ?? 0;
    sources.push(num(cost.input_tokens) !== null ? 'tokens: cost block' : 'tokens: none reported');
  }

  const testResult = isObject(record.test_result) ? record.test_result : {};
  const lastAgent = agentActions[agentActions.length - 1];
  return {
    instanceId: str(record.instance_id),
    gitPatch: str(testResult.git_patch),
    rounds,
    inputTokens,
    outputTokens,
    countSource: sources.join('; '),
    error: str(record.error),
    finished: agentActions.some((e) => e.action === 'finish'),
    endedWithMessage: lastAgent?.action === 'message',
    trajectory: historyToMessages(record.history),
  };
}

/** The output record for `instanceId` from an output.jsonl's text (the last line wins, as on a resumed run). */
export function findOutputRecord(text: string, instanceId: string): { record: Json | null; badLines: number } {
  let found: Json | null = null;
  let badLines = 0;
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      badLines++;
      continue;
    }
    if (isObject(parsed) && parsed.instance_id === instanceId) found = parsed;
  }
  return { record: found, badLines };
}
