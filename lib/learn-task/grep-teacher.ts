/**
 * The grep teacher of the learnable task: a competent policy written down, for RFT to sample from (CodeScout §4.1
 * samples a stronger policy and keeps its F1 = 1.0 rollouts). Its first turn greps (a real tool call, run by the
 * agent loop in the sandbox) for the definition of the function the issue names; its second answers, in CodeGrep's
 * `<answer>` format, the file of the first `path:line:` it finds in the tool result it was sent back. No tool
 * result, or no match: it answers nothing, which scores 0.
 */

export type TeacherMessage = { role: string; content?: unknown };

export type TeacherTurn = { kind: 'grep'; pattern: string } | { kind: 'answer'; files: string[] };

export function teacherTurn(messages: readonly TeacherMessage[]): TeacherTurn {
  const issue = String(messages.find((m) => m.role === 'user')?.content ?? '');
  const tool = messages.filter((m) => m.role === 'tool').at(-1);
  if (!tool) {
    const functionName = /`([A-Za-z_][A-Za-z0-9_]*)`/.exec(issue)?.[1];
    return functionName ? { kind: 'grep', pattern: `def ${functionName}\\b` } : { kind: 'answer', files: [] };
  }
  const found = /(?:^|\n)([\w./-]+\.py):\d+:/.exec(String(tool.content ?? ''))?.[1];
  return { kind: 'answer', files: found ? [found] : [] };
}

export function answerText(files: readonly string[]): string {
  return `<answer>${JSON.stringify({ files })}</answer>`;
}
