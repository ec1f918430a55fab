import { z } from 'zod';

// The built-in agent's tool arguments (SWE-agent / OpenHands `str_replace_editor`, and `submit`); lib/downstream/agents/editor.ts runs them.

export const EDITOR_TOOL_NAME = 'str_replace_editor';
export const SUBMIT_TOOL_NAME = 'submit';

export const EditorCommandSchema = z.enum(['view', 'create', 'str_replace', 'insert']);
export type EditorCommand = z.infer<typeof EditorCommandSchema>;

export const EditorArgsSchema = z
  .object({
    command: EditorCommandSchema.describe('The command to run: view, create, str_replace or insert.'),
    path: z.string().min(1).max(4096).describe('Path of the file or directory, relative to the repository root (e.g. "pkg/module.py").'),
    file_text: z.string().optional().describe('`create`: the content of the new file.'),
    old_str: z
      .string()
      .optional()
      .describe('`str_replace`: the exact text to replace; it must occur exactly once in the file, whitespace included.'),
    new_str: z
      .string()
      .optional()
      .describe('`str_replace`: the replacement (default: empty, i.e. delete old_str). `insert`: the text to insert.'),
    insert_line: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('`insert`: new_str is inserted AFTER this line number (0 inserts at the top of the file).'),
    view_range: z
      .array(z.number().int())
      .length(2)
      .optional()
      .describe('`view` of a file: [start, end] line numbers, 1-based and inclusive; end -1 means to the end of the file.'),
  })
  .strict();
export type EditorArgs = z.infer<typeof EditorArgsSchema>;

export const SubmitArgsSchema = z
  .object({
    message: z.string().optional().describe('A short summary of the change (optional).'),
  })
  .strict();
