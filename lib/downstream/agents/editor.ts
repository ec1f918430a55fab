import { promises as fs, constants, type Dirent } from 'node:fs';
import path from 'node:path';
import { EditorArgsSchema, type EditorArgs } from '../../../schemas/downstream';
import type { ToolResult } from '../../../schemas/tools';
import { EDITOR_LIMITS, type EditorLimits } from '../../sandbox/limits';
import type { SandboxIsolation } from '../../sandbox/namespace';
import { guardPath, guardWritePath, isGitRefusedComponent } from '../../sandbox/paths';
import { displayPath, errorResult } from '../../sandbox/tool-result';
import { createKeyedLock } from '../../locks/keyed-lock';
import { chooseWriter, type FileWriter } from './editor-write';

export { EDITOR_LIMITS };

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
 * Safety, in layers:
 * - every path goes through lib/sandbox's one path guard: reads through guardPath (canonicalised, refused
 *   when it leaves the root), writes through guardWritePath (no link at any level, no hard-linked file, no
 *   name git refuses as `.git`: `.GIT`, `.git `, `git~1`, `.git::$INDEX_ALLOCATION`, HFS look-alikes, and no
 *   backslash or NUL);
 * - every write runs inside the OS sandbox's writable view of the worktree (editor-write.ts), so a directory
 *   flipped into a link by an outside process after the check can lead nowhere outside;
 * - EDITOR_LIMITS (lib/sandbox/limits.ts) bound what one call and one episode may write: no file larger
 *   than `view` accepts, no old_str/new_str over maxEditStringBytes, at most maxCreatedFilesPerEpisode new
 *   files;
 * - one writer per file at a time (lib/locks/keyed-lock.ts): concurrent edits of one file apply one after another, each
 *   on the text the previous one left.
 * Files are edited as exact text (no tab expansion, line endings kept); binary, non-UTF-8 and oversized
 * files are refused, never rewritten. Never throws: every refusal is an error observation for the model.
 */
export interface EditorOptions {
  /**
   * 'namespace' (default): writes run inside the bubblewrap view, and are refused when the machine cannot
   * make one. 'filter-only': in-process writes behind the path guard alone.
   */
  isolation?: SandboxIsolation;
  /** Overrides of EDITOR_LIMITS (tests use small ones). */
  limits?: Partial<EditorLimits>;
}

/** One episode's editor: the created-file count is per episode, so the agent makes one per run. */
export interface Editor {
  run(rawArgs: unknown): Promise<ToolResult>;
  /** Files this episode has created so far (reserved ones included). */
  createdFiles(): number;
}

const CLIPPED_NOTE =
  '<response clipped><NOTE>To save context only part of this output is shown. View a smaller part with view_range, or search with the terminal tool (rg -n).</NOTE>';

interface Episode {
  root: string;
  limits: EditorLimits;
  isolation: SandboxIsolation;
  writer: Promise<{ ok: true; writer: FileWriter } | { ok: false; message: string }> | undefined;
  created: number;
}

function clip(text: string, limits: EditorLimits): ToolResult {
  if (text.length <= limits.maxOutputChars) return { status: 'ok', output: text };
  return { status: 'truncated', output: `${text.slice(0, limits.maxOutputChars)}\n${CLIPPED_NOTE}`, message: 'output clipped' };
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

function hasGitRefusedComponent(relative: string): boolean {
  return relative.split(/[\\/]/).some(isGitRefusedComponent);
}

function tooLarge(what: string, bytes: number, limit: number, hint: string): ToolResult {
  return errorResult(`${what} is ${bytes} bytes, over the editor's ${limit}-byte limit; ${hint}`);
}

type Loaded = { ok: true; absolute: string; relative: string; text: string; mode: number } | { ok: false; result: ToolResult };

/**
 * Guards `userPath`, requires a regular text file within the size limit, and reads it. For writing, the
 * write guard comes first (no link anywhere on the way, no hard link, no .git name).
 */
async function loadTextFile(episode: Episode, userPath: string, forWriting: boolean): Promise<Loaded> {
  let mode = 0o644;
  if (forWriting) {
    const target = await guardWritePath(episode.root, userPath, 'existing-file');
    if (!target.ok) return { ok: false, result: errorResult(target.message) };
    mode = target.mode;
  }
  const guarded = await guardPath(episode.root, userPath);
  if (!guarded.ok) return { ok: false, result: errorResult(guarded.message) };
  if (hasGitRefusedComponent(guarded.relative)) return { ok: false, result: errorResult(GIT_REFUSAL(userPath)) };
  if (guarded.kind === 'directory') {
    return {
      ok: false,
      result: errorResult(`${displayPath(guarded.relative)} is a directory${forWriting ? '; only files can be edited' : ''}`),
    };
  }
  if (guarded.kind !== 'file') return { ok: false, result: errorResult(`${displayPath(guarded.relative)} is not a regular file`) };
  if (guarded.size > episode.limits.maxFileBytes) {
    return {
      ok: false,
      result: tooLarge(
        displayPath(guarded.relative),
        guarded.size,
        episode.limits.maxFileBytes,
        "use the terminal tool (sed -n 'N,Mp') to read parts of it",
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
  if (bytes.length > episode.limits.maxFileBytes) {
    return {
      ok: false,
      result: tooLarge(displayPath(guarded.relative), bytes.length, episode.limits.maxFileBytes, 'it grew while being read'),
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
  return { ok: true, absolute: guarded.absolute, relative: guarded.relative, text, mode };
}

/** The episode's writer, chosen once (the namespace probe is cached per process). */
async function writerOf(episode: Episode): Promise<{ ok: true; writer: FileWriter } | { ok: false; result: ToolResult }> {
  episode.writer ??= chooseWriter(episode.isolation);
  const choice = await episode.writer;
  return choice.ok ? choice : { ok: false, result: errorResult(choice.message) };
}

/** The key of the one-writer-per-file lock: the canonical absolute path the write guard resolved. */
async function lockKey(episode: Episode, userPath: string, expect: 'existing-file' | 'new-file'): Promise<string | ToolResult> {
  const target = await guardWritePath(episode.root, userPath, expect);
  if (!target.ok) {
    if (target.reason === 'exists') {
      return errorResult(`File already exists at: ${displayPath(userPath)}. Cannot overwrite files using command \`create\`.`);
    }
    return errorResult(target.message);
  }
  return target.absolute;
}

/** One writer per file: concurrent edits of one file apply one after another (see the header). */
const fileLocks = createKeyedLock();

/**
 * Runs `edit` on an existing text file under its lock, loaded under the lock so the text is what the previous
 * writer of this file left. The path's refusals (outside the worktree, not a file, too large) come back as
 * the tool's error.
 */
async function editLocked(
  episode: Episode,
  userPath: string,
  edit: (loaded: Extract<Loaded, { ok: true }>, shown: string) => Promise<ToolResult>,
): Promise<ToolResult> {
  const key = await lockKey(episode, userPath, 'existing-file');
  if (typeof key !== 'string') return key;
  return fileLocks.run(key, async () => {
    const loaded = await loadTextFile(episode, userPath, true);
    if (!loaded.ok) return loaded.result;
    return edit(loaded, displayPath(loaded.relative));
  });
}

/** Rejects an old_str / new_str over the limit before any file is touched. */
function oversizedString(episode: Episode, name: string, value: string | undefined): ToolResult | null {
  if (value === undefined) return null;
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes <= episode.limits.maxEditStringBytes) return null;
  return tooLarge(name, bytes, episode.limits.maxEditStringBytes, 'split the change into smaller edits');
}

/** Writes `updated` over the loaded file, unless the result is larger than view accepts. */
async function writeEdited(episode: Episode, loaded: Extract<Loaded, { ok: true }>, updated: string): Promise<ToolResult | null> {
  const bytes = Buffer.byteLength(updated, 'utf8');
  if (bytes > episode.limits.maxFileBytes) {
    return tooLarge(
      `the edited ${displayPath(loaded.relative)}`,
      bytes,
      episode.limits.maxFileBytes,
      'no change was made (the editor never leaves a file it could not view)',
    );
  }
  const writer = await writerOf(episode);
  if (!writer.ok) return writer.result;
  const written = await writer.writer.replace(episode.root, loaded.relative, updated, loaded.mode);
  return written.ok ? null : errorResult(written.message);
}

function snippetAround(lines: readonly string[], firstChanged: number, lastChanged: number, limits: EditorLimits): string {
  const from = Math.max(1, firstChanged - limits.snippetContextLines);
  const to = Math.min(lines.length, lastChanged + limits.snippetContextLines);
  return numbered(lines.slice(from - 1, to), from);
}

const REVIEW = 'Review the changes and make sure they are as expected. Edit the file again if necessary.';

async function view(episode: Episode, args: EditorArgs): Promise<ToolResult> {
  const guarded = await guardPath(episode.root, args.path);
  if (!guarded.ok) return errorResult(guarded.message);
  if (hasGitRefusedComponent(guarded.relative)) return errorResult(GIT_REFUSAL(args.path));
  if (guarded.kind === 'directory') {
    if (args.view_range !== undefined) return errorResult('view_range is only allowed when path is a file, not a directory');
    return viewDirectory(episode, guarded.absolute, guarded.relative);
  }
  const loaded = await loadTextFile(episode, args.path, false);
  if (!loaded.ok) return loaded.result;
  const { lines } = splitLines(loaded.text);
  const shown = displayPath(loaded.relative);
  if (args.view_range === undefined) {
    if (lines.length === 0) return { status: 'ok', output: `${shown} is empty.` };
    return clip(`Here's the result of running \`cat -n\` on ${shown}:\n${numbered(lines, 1)}\n`, episode.limits);
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
    episode.limits,
  );
}

async function viewDirectory(episode: Episode, absolute: string, relative: string): Promise<ToolResult> {
  const maxEntries = episode.limits.maxDirectoryEntries;
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
      if (entries.length >= maxEntries) {
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
  const footer = more ? `\n[more than ${maxEntries} entries; view a subdirectory]` : '';
  return clip(`${header}\n${entries.join('\n')}${footer}\n`, episode.limits);
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

async function strReplace(episode: Episode, args: EditorArgs): Promise<ToolResult> {
  if (args.old_str === undefined || args.old_str === '') return errorResult('str_replace needs a non-empty old_str');
  const oldStr = args.old_str;
  const newStr = args.new_str ?? '';
  if (oldStr === newStr) return errorResult('No replacement was performed: new_str and old_str must be different.');
  const oversized = oversizedString(episode, 'old_str', oldStr) ?? oversizedString(episode, 'new_str', newStr);
  if (oversized) return oversized;
  return editLocked(episode, args.path, async (loaded, shown) => {
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
    const failed = await writeEdited(episode, loaded, updated);
    if (failed) return failed;
    const firstLine = found.lines[0]!;
    const lastLine = firstLine + Math.max(0, newStr.split('\n').length - 1);
    const { lines } = splitLines(updated);
    return clip(
      `The file ${shown} has been edited. Here's the result of running \`cat -n\` on a snippet of ${shown}:\n${snippetAround(lines, firstLine, lastLine, episode.limits)}\n${REVIEW}`,
      episode.limits,
    );
  });
}

async function insert(episode: Episode, args: EditorArgs): Promise<ToolResult> {
  if (args.insert_line === undefined) return errorResult('insert needs insert_line (the line after which new_str goes; 0 for the top)');
  if (args.new_str === undefined) return errorResult('insert needs new_str (the text to insert)');
  const newStr = args.new_str;
  const insertLine = args.insert_line;
  const oversized = oversizedString(episode, 'new_str', newStr);
  if (oversized) return oversized;
  return editLocked(episode, args.path, async (loaded, shown) => {
    const { lines, trailingNewline } = splitLines(loaded.text);
    if (insertLine > lines.length) {
      return errorResult(`invalid insert_line ${insertLine}: it must be between 0 and ${lines.length} (the file's line count)`);
    }
    const inserted = splitLines(newStr.endsWith('\n') ? newStr : `${newStr}\n`).lines;
    const updatedLines = [...lines.slice(0, insertLine), ...inserted, ...lines.slice(insertLine)];
    // A file that ended without a newline keeps that unless the insertion became its new last line.
    const endsWithNewline = trailingNewline || lines.length === 0 || insertLine === lines.length;
    const failed = await writeEdited(episode, loaded, joinLines(updatedLines, endsWithNewline));
    if (failed) return failed;
    return clip(
      `The file ${shown} has been edited. Here's the result of running \`cat -n\` on a snippet of the edited file:\n` +
        `${snippetAround(updatedLines, insertLine + 1, insertLine + inserted.length, episode.limits)}\n${REVIEW}`,
      episode.limits,
    );
  });
}

async function create(episode: Episode, args: EditorArgs): Promise<ToolResult> {
  if (args.file_text === undefined) return errorResult('create needs file_text (the content of the new file)');
  const text = args.file_text;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > episode.limits.maxFileBytes) {
    return tooLarge('file_text', bytes, episode.limits.maxFileBytes, 'the editor never creates a file it could not view');
  }
  const key = await lockKey(episode, args.path, 'new-file');
  if (typeof key !== 'string') return key;
  const writer = await writerOf(episode);
  if (!writer.ok) return writer.result;
  // Reserved before the write, so many concurrent creates cannot all pass the check and overshoot the cap.
  if (episode.created >= episode.limits.maxCreatedFilesPerEpisode) {
    return errorResult(
      `refused: this episode already created ${episode.created} files, the editor's limit (${episode.limits.maxCreatedFilesPerEpisode}); edit existing files instead`,
    );
  }
  episode.created += 1;
  const result = await fileLocks.run(key, async (): Promise<ToolResult> => {
    const target = await guardWritePath(episode.root, args.path, 'new-file');
    if (!target.ok) {
      if (target.reason === 'exists') {
        return errorResult(`File already exists at: ${displayPath(args.path)}. Cannot overwrite files using command \`create\`.`);
      }
      return errorResult(target.message);
    }
    const written = await writer.writer.create(target.root, target.relative, text);
    if (!written.ok) return errorResult(written.message);
    // A directory flipped into a link during the write sends it into the sandbox's own throw-away view; the
    // model is told the truth rather than "created" for a file that is not in the worktree.
    const arrived = await guardWritePath(episode.root, args.path, 'existing-file');
    if (!arrived.ok) {
      return errorResult(`cannot create ${displayPath(target.relative)}: the file is not there after the write (${arrived.message})`);
    }
    return { status: 'ok', output: `File created successfully at: ${displayPath(target.relative)}` };
  });
  if (result.status === 'error') episode.created -= 1;
  return result;
}

function parseArgs(rawArgs: unknown): { ok: true; args: EditorArgs } | { ok: false; result: ToolResult } {
  let args: unknown = rawArgs;
  if (typeof rawArgs === 'string') {
    try {
      args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
    } catch (error) {
      return {
        ok: false,
        result: errorResult(
          `arguments for str_replace_editor are not valid JSON: ${error instanceof Error ? error.message : String(error)}`,
        ),
      };
    }
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args))
    return { ok: false, result: errorResult('arguments for str_replace_editor must be a JSON object') };
  const withoutNulls = Object.fromEntries(Object.entries(args as Record<string, unknown>).filter(([, v]) => v !== null));
  const parsed = EditorArgsSchema.safeParse(withoutNulls);
  if (!parsed.success) {
    const issues = parsed.error.issues.slice(0, 5).map((i) => `${i.path.length ? i.path.join('.') : 'arguments'}: ${i.message}`);
    return { ok: false, result: errorResult(`invalid arguments for str_replace_editor: ${issues.join('; ')}`) };
  }
  return { ok: true, args: parsed.data };
}

/**
 * The editor of one episode in the worktree `root`. `run` takes the JSON string of an OpenAI tool call or an
 * object; keys whose value is null count as absent.
 */
export function createEditor(root: string, options: EditorOptions = {}): Editor {
  const episode: Episode = {
    root,
    limits: { ...EDITOR_LIMITS, ...options.limits },
    isolation: options.isolation ?? 'namespace',
    writer: undefined,
    created: 0,
  };
  return {
    createdFiles: () => episode.created,
    async run(rawArgs: unknown): Promise<ToolResult> {
      const parsed = parseArgs(rawArgs);
      if (!parsed.ok) return parsed.result;
      try {
        switch (parsed.args.command) {
          case 'view':
            return await view(episode, parsed.args);
          case 'str_replace':
            return await strReplace(episode, parsed.args);
          case 'insert':
            return await insert(episode, parsed.args);
          case 'create':
            return await create(episode, parsed.args);
        }
      } catch (error) {
        return errorResult(`str_replace_editor failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    },
  };
}

/** One call in an episode of its own (no created-file count carries over): for tools and tests that edit once. */
export function runEditor(root: string, rawArgs: unknown, options: EditorOptions = {}): Promise<ToolResult> {
  return createEditor(root, options).run(rawArgs);
}
