import { CodeGrepAnswerPayloadSchema, type CodeGrepAnswer } from '../../schemas/agent';
import { normalizeRepoPath } from '../paths/normalize';
import type { AnswerReply, ReplyAnswer } from './answer-format';
import { describeIssues } from './describe-issues';

/**
 * CodeGrep's answer (§3.2): `<answer>{"files": [...], "line_ranges": [...]}</answer>` in the reply text.
 * Schema: schemas/agent.ts (CodeGrepAnswerPayloadSchema); paths are normalised against the worktree root so
 * an absolute path inside the worktree counts as the repository path it names.
 */

const OPEN = '<answer>';
const CLOSE = '</answer>';

export type AnswerBlock =
  | { kind: 'none' }
  /** The text between the tags of the last complete block (a reply that drafts and then corrects keeps the correction). */
  | { kind: 'complete'; body: string }
  /** `<answer>` without `</answer>`: cut by the token budget, or malformed. */
  | { kind: 'unterminated'; body: string };

/** Finds the answer block of a reply whose reasoning has already been removed. */
export function findAnswerBlock(text: string): AnswerBlock {
  let last: string | undefined;
  let cursor = 0;
  for (;;) {
    const open = text.indexOf(OPEN, cursor);
    if (open === -1) break;
    const close = text.indexOf(CLOSE, open + OPEN.length);
    if (close === -1) {
      if (last === undefined) return { kind: 'unterminated', body: text.slice(open + OPEN.length) };
      break;
    }
    last = text.slice(open + OPEN.length, close);
    cursor = close + CLOSE.length;
  }
  return last === undefined ? { kind: 'none' } : { kind: 'complete', body: last };
}

/** Models like to fence JSON even inside tags: a single surrounding ``` or ```json fence is removed. */
function stripCodeFence(body: string): string {
  const fenced = /^```[a-zA-Z]*\s*\n?([\s\S]*?)\n?\s*```$/.exec(body);
  return fenced ? fenced[1]!.trim() : body;
}

export type ParsedAnswer<T> = { ok: true; answer: T } | { ok: false; error: string };

/** Validates the JSON of an answer block. Every failure is a message, never an exception. */
export function parseCodeGrepAnswer(body: string, worktreeRoot: string): ParsedAnswer<CodeGrepAnswer> {
  const json = stripCodeFence(body.trim());
  if (json === '') return { ok: false, error: 'the <answer> block is empty; expected {"files": [...], "line_ranges": [...]}' };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    return { ok: false, error: `the <answer> block is not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
  const parsed = CodeGrepAnswerPayloadSchema.safeParse(value);
  if (!parsed.success) return { ok: false, error: `the <answer> JSON does not match the schema: ${describeIssues(parsed.error)}` };

  const problems: string[] = [];
  const normalise = (raw: string, where: string): string => {
    const path = normalizeRepoPath(raw, { root: worktreeRoot });
    if (path === '') problems.push(`${where}: ${JSON.stringify(raw)} is not a file path`);
    return path;
  };
  const files = parsed.data.files.map((f, i) => normalise(f, `files[${i}]`));
  const lineRanges = (parsed.data.line_ranges ?? []).map((r, i) => ({ ...r, path: normalise(r.path, `line_ranges[${i}]`) }));
  if (problems.length > 0) return { ok: false, error: `the <answer> JSON does not match the schema: ${problems.join('; ')}` };
  return { ok: true, answer: { files, lineRanges } };
}

/**
 * A CodeGrep reply answers with its `<answer>` block: a complete block ends the episode (valid or not); an
 * unterminated one is a spent budget when generation was cut, an invalid answer otherwise.
 */
export function readCodeGrepReply(reply: AnswerReply, worktreeRoot: string): ReplyAnswer {
  const block = findAnswerBlock(reply.content);
  if (block.kind === 'complete') {
    const parsed = parseCodeGrepAnswer(block.body, worktreeRoot);
    return { finishCalls: 0, end: { reason: parsed.ok ? 'answer' : 'invalid_answer', parsed } };
  }
  if (block.kind === 'unterminated') {
    if (reply.truncated) return { finishCalls: 0, end: { reason: 'budget' } };
    return {
      finishCalls: 0,
      end: { reason: 'invalid_answer', parsed: { ok: false, error: 'the <answer> block has no closing </answer>' } },
    };
  }
  return { finishCalls: 0 };
}
