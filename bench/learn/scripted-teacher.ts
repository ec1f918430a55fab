import type { ChatRequestBody, ScriptedReply } from '../../test/support/scripted-openai-server';
import { reply } from '../../test/support/scripted-openai-server';

/**
 * The scripted teacher of the learnable task (LEARN_TASK.md): a competent policy written down. Its first turn
 * greps (a REAL tool call, run by the agent loop in the sandbox) for the definition of the function the issue
 * names; its second answers, in CodeGrep's `<answer>` format, the file of the first `path:line:` it finds in the
 * tool result it was sent back. No tool result, or no match: it answers nothing, which scores 0.
 */
type Message = { role: string; content?: unknown };

export function componentTeacher(body: ChatRequestBody): ScriptedReply {
  const messages = (body.messages ?? []) as Message[];
  const issue = String(messages.find((m) => m.role === 'user')?.content ?? '');
  const tool = messages.filter((m) => m.role === 'tool').at(-1);
  if (!tool) {
    const fn = /`([A-Za-z_][A-Za-z0-9_]*)`/.exec(issue)?.[1];
    if (!fn) return reply.text('<answer>{"files": []}</answer>');
    return reply.toolCalls([{ name: 'grep', arguments: { pattern: `def ${fn}\\b` } }]);
  }
  const found = /(?:^|\n)([\w./-]+\.py):\d+:/.exec(String(tool.content ?? ''))?.[1];
  return reply.text(`<answer>${JSON.stringify({ files: found ? [found] : [] })}</answer>`);
}
