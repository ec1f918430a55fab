import { constants, promises as fs, type Dirent } from 'node:fs';
import path from 'node:path';
import { EditorArgsSchema, type EditorArgs } from '../../schemas/downstream';
import type { ToolResult } from '../../schemas/tools';
import { canonicalRoot, guardPath, hasGitComponent, isInside } from '../sandbox/paths';
import { displayPath, errorResult } from '../sandbox/tool-result';

/**
 * The built-in downstream agent's file viewer/editor, `str_replace_editor`, with the semantics SWE-agent and
 * OpenHands give it:
 * - `view`: a file with line numbers (`cat -n` layout), optionally `view_range` [start, end] (end −1 = to the
 *   end); a directory as its non-hidden entries up to 2 levels deep.
 * - `str_replace`: `old_str` must occur exactly once (none → "did not appear verbatim", several → the lines
 *   where it does); replaced by `new_str` (default ''). Shows the edited region.
 * - `insert`: `new_str` after line `insert_line` (0 = top of the file).
 * - `create`: a new file with `file_text`, parent directories made as needed; refuses an existing path.
 *
 * Every path goes through lib/sandbox's path guard (resolved against the worktree root, canonicalised with
 * realpath, refused when it leaves the root — `..`, outside absolute paths, symlinks pointing out) and the
 * write goes to the canonical path, so no edit can land outside the worktree. Writes are checked before
 * anything is written by guardWritePath: no `.git` component anywhere in the path (a write there is code
 * execution: core.fsmonitor, hooks, a nested repository), no symlink at any level, no hard-linked file.
 * Files are edited as exact text (no tab
 * expansion, line endings kept); binary, non-UTF-8 and oversized files are refused, never rewritten.
 * Never throws: every refusal is an error observation for the model.
 */
export const EDITOR_LIMITS = {
  /** Largest file view/edit will load. */
  maxFileBytes: 4 * 1024 * 1024,
  /** Longest observation; beyond it the output is clipped with a note on how to see the rest. */
  maxOutputChars: 16_000,
  /** Lines shown above and below an edit. */
  snippetContextLines: 4,
  /** Entries listed by a directory view. */
  maxDirectoryEntries: 400,
} as const;

const CLIPPED_NOTE =
  '<response clipped><NOTE>To save context only part of this output is shown. View a smaller part with view_range, or search with the terminal tool (rg -n).</NOTE>';

function clip(text: string): ToolResult {
  if (text.length <= EDITOR_LIMITS.maxOutputChars) return { status: 'ok', output: text };
  return { status: 'truncated', output: `${text.slice(0, EDITOR_LIMITS.maxOutputChars)}\n${CLIPPED_NOTE}`, message: 'output clipped' };
}

function numbered(lines: readonly string[], firstNumber: number): string {
  return lines.map((line, i) => `${String(firstNumber + i).padStart(6)}\t${line}`).join('\n');
}

/** Splits file text into lines without the final newline's empty tail; '' has no lines. */
function splitLines(text: string): { lines: string[]; trailingNewline: boolean } {
  if (text === '') return { lines: [], trailingNewline: false };
  const trailingNewline = text.endsWith('\n');
  return { lines: (trailingNewline ? text.slice(0, -1) : text).split('\n'), trailingNewline };
}

function joinLines(lines: readonly string[], trailingNewline: boolean): string {
  return lines.length === 0 ? '' : lines.join('\n') + (trailingNewline ? '\n' : '');
}

const GIT_REFUSAL = (userPath: string) => `path ${JSON.stringify(userPath)} is inside .git; refused (git's control data is never edited)`;

type WriteTarget = { ok: true; root: string; absolute: string; relative: string; exists: boolean } | { ok: false; result: ToolResult };

/**
 * Where a write to `userPath` would land, checked component by component before anything is written:
 * - the path (absolute only when under the root) must stay inside the root lexically;
 * - no component may be `.git` (any case): not the root's, not a nested one (`pkg/.git/config`), so no
 *   write can make a repository, a config with core.fsmonitor, a hook, alternates or refs;
 * - no existing component may be a symlink: the editor never writes through a link, wherever it points
 *   (at `.git`, outside, or inside), so what is written is exactly the path that was checked. The agent
 *   has no way to create links, so this refuses only links the repository (or an outside agent) put there;
 * - an existing target must be a regular file with no other hard link (git never makes hard links in a
 *   checkout, so a second link can only point at data outside this path's control).
 * `mustExist`: str_replace / insert (the file must be there) versus create (it must not).
 */
async function guardWritePath(rootPath: string, userPath: string, mustExist: boolean): Promise<WriteTarget> {
  const refuse = (message: string): WriteTarget => ({ ok: false, result: errorResult(message) });
  if (userPath.includes('\0')) return refuse('path contains a NUL byte; refused');
  const root = await canonicalRoot(rootPath);
  if (!root.ok) return refuse(root.message);
  let lexical: string;
  if (path.isAbsolute(userPath)) {
    const normalized = path.normalize(userPath);
    const givenRoot = path.resolve(rootPath);
    if (isInside(root.root, normalized)) lexical = normalized;
    else if (isInside(givenRoot, normalized)) lexical = path.join(root.root, path.relative(givenRoot, normalized));
    else
      return refuse(
        `path ${JSON.stringify(userPath)} is outside the repository root; refused (use a path relative to the repository root)`,
      );
  } else {
    lexical = path.resolve(root.root, userPath);
    if (!isInside(root.root, lexical)) return refuse(`path ${JSON.stringify(userPath)} leaves the repository root; refused`);
  }
  if (lexical === root.root) return refuse('the path must name a file, not the repository root');
  const relative = path.relative(root.root, lexical);
  if (hasGitComponent(relative)) return refuse(GIT_REFUSAL(userPath));
  const components = relative.split(path.sep);
  let current = root.root;
  for (let k = 0; k < components.length; k++) {
    current = path.join(current, components[k]!);
    const shown = displayPath(components.slice(0, k + 1).join('/'));
    const last = k === components.length - 1;
    let stat;
    try {
      stat = await fs.lstat(current);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT') return refuse(`cannot inspect ${shown} (${code ?? String(error)})`);
      if (mustExist) return refuse(`no such file or directory: ${JSON.stringify(userPath)}`);
      return { ok: true, root: root.root, absolute: lexical, relative, exists: false };
    }
    if (stat.isSymbolicLink()) {
      return refuse(`${shown} is a symlink; the editor never writes through symlinks (edit the file it stands for by its own path)`);
    }
    if (!last && !stat.isDirectory()) return refuse(`${shown} is not a directory`);
    if (last) {
      if (!mustExist) return refuse(`File already exists at: ${displayPath(relative)}. Cannot overwrite files using command \`create\`.`);
      if (stat.isDirectory()) return refuse(`${displayPath(relative)} is a directory; only files can be edited`);
      if (!stat.isFile()) return refuse(`${displayPath(relative)} is not a regular file`);
      if (stat.nlink > 1) return refuse(`${displayPath(relative)} has other hard links; refused (editing it would change files elsewhere)`);
    }
  }
  return { ok: true, root: root.root, absolute: lexical, relative, exists: true };
}

type Loaded = { ok: true; absolute: string; relative: string; text: string } | { ok: false; result: ToolResult };

/** Guards `userPath`, requires a regular text file, and reads it. */
async function loadTextFile(root: string, userPath: string, forWriting: boolean): Promise<Loaded> {
  if (forWriting) {
    const target = await guardWritePath(root, userPath, true);
    if (!target.ok) return target;
  }
  const guarded = await guardPath(root, userPath);
  if (!guarded.ok) return { ok: false, result: errorResult(guarded.message) };
  if (hasGitComponent(guarded.relative)) return { ok: false, result: errorResult(GIT_REFUSAL(userPath)) };
  if (guarded.kind === 'directory') {
    return {
      ok: false,
      result: errorResult(`${displayPath(guarded.relative)} is a directory${forWriting ? '; only files can be edited' : ''}`),
    };
  }
  if (guarded.kind !== 'file') return { ok: false, result: errorResult(`${displayPath(guarded.relative)} is not a regular file`) };
  if (guarded.size > EDITOR_LIMITS.maxFileBytes) {
    return {
      ok: false,
      result: errorResult(
        `${displayPath(guarded.relative)} is ${guarded.size} bytes, over the editor's ${EDITOR_LIMITS.maxFileBytes}-byte limit; use the terminal tool (sed -n 'N,Mp') to read parts of it`,
      ),
    };
  }
  let bytes: Buffer;
  try {
    // O_NOFOLLOW: the canonical path has no symlink left; if one was swapped in since, refuse rather than follow.
    const handle = await fs.open(guarded.absolute, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      bytes = await handle.readFile();
    } finally {
      await handle.close();
    }
  } catch (error) {
    return {
      ok: false,
      result: errorResult(`cannot read ${displayPath(guarded.relative)} (${(error as NodeJS.ErrnoException).code ?? String(error)})`),
    };
  }
  if (bytes.includes(0))
    return { ok: false, result: errorResult(`${displayPath(guarded.relative)} is a binary file; not shown or edited`) };
  const text = bytes.toString('utf8');
  if (forWriting && !Buffer.from(text, 'utf8').equals(bytes)) {
    return {
      ok: false,
      result: errorResult(`${displayPath(guarded.relative)} is not valid UTF-8; it is not edited (rewriting it would corrupt it)`),
    };
  }
  return { ok: true, absolute: guarded.absolute, relative: guarded.relative, text };
}

async function writeExisting(absolute: string, text: string): Promise<void> {
  // O_NOFOLLOW on the canonical path (see loadTextFile); truncating in place keeps the file's mode.
  const handle = await fs.open(absolute, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
  try {
    await handle.writeFile(text, 'utf8');
  } finally {
    await handle.close();
  }
}

function snippetAround(lines: readonly string[], firstChanged: number, lastChanged: number): string {
  const from = Math.max(1, firstChanged - EDITOR_LIMITS.snippetContextLines);
  const to = Math.min(lines.length, lastChanged + EDITOR_LIMITS.snippetContextLines);
  return numbered(lines.slice(from - 1, to), from);
}

const REVIEW = 'Review the changes and make sure they are as expected. Edit the file again if necessary.';

async function view(root: string, args: EditorArgs): Promise<ToolResult> {
  const guarded = await guardPath(root, args.path);
  if (!guarded.ok) return errorResult(guarded.message);
  if (hasGitComponent(guarded.relative)) return errorResult(GIT_REFUSAL(args.path));
  if (guarded.kind === 'directory') {
    if (args.view_range !== undefined) return errorResult('view_range is only allowed when path is a file, not a directory');
    return viewDirectory(guarded.absolute, guarded.relative);
  }
  const loaded = await loadTextFile(root, args.path, false);
  if (!loaded.ok) return loaded.result;
  const { lines } = splitLines(loaded.text);
  const shown = displayPath(loaded.relative);
  if (args.view_range === undefined) {
    if (lines.length === 0) return { status: 'ok', output: `${shown} is empty.` };
    return clip(`Here's the result of running \`cat -n\` on ${shown}:\n${numbered(lines, 1)}\n`);
  }
  const [start, end] = args.view_range as [number, number];
  if (start < 1 || start > Math.max(1, lines.length)) {
    return errorResult(
      `invalid view_range [${start}, ${end}]: the first line must be between 1 and ${lines.length} (the file's line count)`,
    );
  }
  if (end !== -1 && (end < start || end > lines.length)) {
    return errorResult(`invalid view_range [${start}, ${end}]: the last line must be -1 or between ${start} and ${lines.length}`);
  }
  const last = end === -1 ? lines.length : end;
  return clip(
    `Here's the result of running \`cat -n\` on ${shown} (lines ${start}-${last}):\n${numbered(lines.slice(start - 1, last), start)}\n`,
  );
}

async function viewDirectory(absolute: string, relative: string): Promise<ToolResult> {
  const entries: string[] = [];
  let more = false;
  const walk = async (dir: string, rel: string, depth: number): Promise<void> => {
    let names: Dirent[];
    try {
      names = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of names) {
      if (entry.name.startsWith('.')) continue;
      if (entries.length >= EDITOR_LIMITS.maxDirectoryEntries) {
        more = true;
        return;
      }
      const childRel = rel === '.' ? entry.name : `${rel}/${entry.name}`;
      // Symlinks are listed, never followed: a link to a directory outside the root stays unexplored.
      const isDir = entry.isDirectory();
      entries.push(displayPath(childRel) + (isDir ? '/' : ''));
      if (isDir && depth < 2) await walk(path.join(dir, entry.name), childRel, depth + 1);
    }
  };
  await walk(absolute, relative, 1);
  const header = `Here's the files and directories up to 2 levels deep in ${relative === '.' ? 'the repository root' : displayPath(relative)}, excluding hidden items:`;
  const footer = more ? `\n[more than ${EDITOR_LIMITS.maxDirectoryEntries} entries; view a subdirectory]` : '';
  return clip(`${header}\n${entries.join('\n')}${footer}\n`);
}

/** Line numbers listed in a "multiple occurrences" refusal; the rest are counted. */
const MAX_LISTED_OCCURRENCES = 20;
/** Characters of old_str echoed in a refusal. */
const MAX_ECHOED_CHARS = 200;

function echo(text: string): string {
  return text.length <= MAX_ECHOED_CHARS ? text : `${text.slice(0, MAX_ECHOED_CHARS)}…[${text.length - MAX_ECHOED_CHARS} more characters]`;
}

/**
 * Where the non-overlapping occurrences of `needle` start: their count, the offset of the first, and the
 * line numbers (1-based) of the first MAX_LISTED_OCCURRENCES. One pass: newlines are counted only between
 * consecutive occurrences, so the cost is linear in the file, however many matches there are.
 */
function findOccurrences(text: string, needle: string): { count: number; firstAt: number; lines: number[] } {
  const lines: number[] = [];
  let count = 0;
  let firstAt = -1;
  let line = 1;
  let counted = 0; // newlines are counted in text[0, counted)
  for (let at = text.indexOf(needle); at !== -1; at = text.indexOf(needle, at + needle.length)) {
    count += 1;
    if (firstAt === -1) firstAt = at;
    if (lines.length < MAX_LISTED_OCCURRENCES) {
      for (let nl = text.indexOf('\n', counted); nl !== -1 && nl < at; nl = text.indexOf('\n', nl + 1)) line += 1;
      counted = at;
      lines.push(line);
    }
  }
  return { count, firstAt, lines };
}

async function strReplace(root: string, args: EditorArgs): Promise<ToolResult> {
  if (args.old_str === undefined || args.old_str === '') return errorResult('str_replace needs a non-empty old_str');
  const oldStr = args.old_str;
  const newStr = args.new_str ?? '';
  if (oldStr === newStr) return errorResult('No replacement was performed: new_str and old_str must be different.');
  const loaded = await loadTextFile(root, args.path, true);
  if (!loaded.ok) return loaded.result;
  const shown = displayPath(loaded.relative);
  const found = findOccurrences(loaded.text, oldStr);
  if (found.count === 0)
    return errorResult(`No replacement was performed, old_str \`${echo(oldStr)}\` did not appear verbatim in ${shown}.`);
  if (found.count > 1) {
    const more = found.count > found.lines.length ? `, … (${found.count} occurrences in all)` : '';
    return errorResult(
      `No replacement was performed. Multiple occurrences of old_str \`${echo(oldStr)}\` in lines [${found.lines.join(', ')}${more}]. Please ensure it is unique.`,
    );
  }
  const at = found.firstAt;
  const updated = loaded.text.slice(0, at) + newStr + loaded.text.slice(at + oldStr.length);
  try {
    await writeExisting(loaded.absolute, updated);
  } catch (error) {
    return errorResult(`cannot write ${shown} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  const firstLine = found.lines[0]!;
  const lastLine = firstLine + Math.max(0, newStr.split('\n').length - 1);
  const { lines } = splitLines(updated);
  return clip(
    `The file ${shown} has been edited. Here's the result of running \`cat -n\` on a snippet of ${shown}:\n${snippetAround(lines, firstLine, lastLine)}\n${REVIEW}`,
  );
}

async function insert(root: string, args: EditorArgs): Promise<ToolResult> {
  if (args.insert_line === undefined) return errorResult('insert needs insert_line (the line after which new_str goes; 0 for the top)');
  if (args.new_str === undefined) return errorResult('insert needs new_str (the text to insert)');
  const loaded = await loadTextFile(root, args.path, true);
  if (!loaded.ok) return loaded.result;
  const shown = displayPath(loaded.relative);
  const { lines, trailingNewline } = splitLines(loaded.text);
  if (args.insert_line > lines.length) {
    return errorResult(`invalid insert_line ${args.insert_line}: it must be between 0 and ${lines.length} (the file's line count)`);
  }
  const inserted = splitLines(args.new_str.endsWith('\n') ? args.new_str : `${args.new_str}\n`).lines;
  const updatedLines = [...lines.slice(0, args.insert_line), ...inserted, ...lines.slice(args.insert_line)];
  // A file that ended without a newline keeps that unless the insertion became its new last line.
  const endsWithNewline = trailingNewline || lines.length === 0 || args.insert_line === lines.length;
  try {
    await writeExisting(loaded.absolute, joinLines(updatedLines, endsWithNewline));
  } catch (error) {
    return errorResult(`cannot write ${shown} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return clip(
    `The file ${shown} has been edited. Here's the result of running \`cat -n\` on a snippet of the edited file:\n` +
      `${snippetAround(updatedLines, args.insert_line + 1, args.insert_line + inserted.length)}\n${REVIEW}`,
  );
}

async function create(rootPath: string, args: EditorArgs): Promise<ToolResult> {
  if (args.file_text === undefined) return errorResult('create needs file_text (the content of the new file)');
  const target = await guardWritePath(rootPath, args.path, false);
  if (!target.ok) return target.result;
  const shown = displayPath(target.relative);
  try {
    // Every existing component was checked above (a real directory, no link, no .git); the rest is made here.
    await fs.mkdir(path.dirname(target.absolute), { recursive: true });
    // 'wx' = O_CREAT|O_EXCL: fails on anything already there, a dangling symlink included.
    await fs.writeFile(target.absolute, args.file_text, { flag: 'wx' });
  } catch (error) {
    return errorResult(`cannot create ${shown} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
  return { status: 'ok', output: `File created successfully at: ${shown}` };
}

/**
 * Runs one `str_replace_editor` call inside the worktree `root`. `rawArgs`: the JSON string of an OpenAI tool
 * call or an object; keys whose value is null count as absent.
 */
export async function runEditor(root: string, rawArgs: unknown): Promise<ToolResult> {
  let args: unknown = rawArgs;
  if (typeof rawArgs === 'string') {
    try {
      args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
    } catch (error) {
      return errorResult(`arguments for str_replace_editor are not valid JSON: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    return errorResult('arguments for str_replace_editor must be a JSON object');
  const withoutNulls = Object.fromEntries(Object.entries(args as Record<string, unknown>).filter(([, v]) => v !== null));
  const parsed = EditorArgsSchema.safeParse(withoutNulls);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : 'arguments'}: ${i.message}`);
    return errorResult(`invalid arguments for str_replace_editor: ${issues.join('; ')}`);
  }
  try {
    switch (parsed.data.command) {
      case 'view':
        return await view(root, parsed.data);
      case 'str_replace':
        return await strReplace(root, parsed.data);
      case 'insert':
        return await insert(root, parsed.data);
      case 'create':
        return await create(root, parsed.data);
    }
  } catch (error) {
    return errorResult(`str_replace_editor failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}
