/**
 * The built-in agent's fixed prompt text. The same for every configuration: only the issue text (which
 * carries the `<candidate_files>` block when one was injected, see inject.ts) differs between them.
 */
export const BUILTIN_SYSTEM_PROMPT = [
  'You are a software engineer fixing an issue in a Python repository checked out at the repository root.',
  'Tools: `terminal` runs read-only search commands (rg, grep, sed -n, cat, head, tail, find, ls, wc joined with |);',
  '`str_replace_editor` views and edits files; `submit` ends your work.',
  'Work step by step: locate the code responsible for the issue, make a minimal change to the non-test source',
  'files that resolves it, re-read your edit, then call `submit`. You cannot run code or tests.',
].join('\n');

export function builtinUserPrompt(repo: string, issue: string): string {
  return [
    `The repository ${repo} is checked out at the repository root. Resolve the following issue.`,
    '',
    '<issue_description>',
    issue,
    '</issue_description>',
    '',
    'Change only what is needed to resolve the issue; do not modify the tests. Call `submit` when you are done.',
  ].join('\n');
}
