import { z } from 'zod';
import { EDITOR_TOOL_NAME, EditorArgsSchema, SUBMIT_TOOL_NAME, SubmitArgsSchema } from '../../../schemas/downstream';
import { toolDefinitions } from '../../../schemas/tools';
import { EDITOR_LIMITS } from '../../sandbox/limits';

/**
 * The built-in downstream agent's tools, as OpenAI function tools: lib/sandbox's restricted `terminal`
 * (read-only search programs), the `str_replace_editor` file viewer/editor, and `submit` to end the run.
 */
function parametersOf(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return parameters;
}

export const EDITOR_TOOL_DESCRIPTION =
  'View, create and edit files of the repository. Paths are relative to the repository root.\n' +
  '* view: a file with line numbers (optionally only view_range [start, end], end -1 = to the end), or a directory (non-hidden entries up to 2 levels deep).\n' +
  '* create: write a new file with file_text; refuses a path that already exists.\n' +
  '* str_replace: replace old_str by new_str. old_str must match EXACTLY ONE place in the file, whitespace and indentation included; include enough surrounding lines to make it unique.\n' +
  '* insert: insert new_str after line insert_line (0 = at the top of the file).\n' +
  `Limits: files up to ${EDITOR_LIMITS.maxFileBytes / 1024 / 1024} MiB (view, create and the result of an edit), old_str/new_str up to ${EDITOR_LIMITS.maxEditStringBytes / 1024} KiB, at most ${EDITOR_LIMITS.maxCreatedFilesPerEpisode} new files per run; paths may not contain .git or a backslash.`;

export const SUBMIT_TOOL_DESCRIPTION =
  'Finish: call this once the issue is resolved. Your changes to the repository are collected as the patch.';

export interface FunctionTool {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export function builtinAgentTools(): FunctionTool[] {
  return [
    ...(toolDefinitions(['terminal']) as FunctionTool[]),
    {
      type: 'function',
      function: { name: EDITOR_TOOL_NAME, description: EDITOR_TOOL_DESCRIPTION, parameters: parametersOf(EditorArgsSchema) },
    },
    {
      type: 'function',
      function: { name: SUBMIT_TOOL_NAME, description: SUBMIT_TOOL_DESCRIPTION, parameters: parametersOf(SubmitArgsSchema) },
    },
  ];
}
