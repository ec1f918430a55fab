/**
 * Unified-diff (git and plain) parser for gold patches.
 *
 * Line-range conventions (docs/design.md "Ground truth from patches"; CodeGrep App. B line-range matching needs a
 * non-empty gold range for every hunk):
 * - Ranges are 1-based, inclusive, in the PRE-image (the file at the base commit the agent sees).
 * - A hunk covers [oldStart, oldStart + oldLines - 1] (context lines included): `hunkRanges`.
 * - `preImageChangedRanges` keeps only the pre-image lines the patch removes or replaces.
 * - A pure insertion has no pre-image line of its own. We use git's own anchor: in `@@ -10,0 +11,2 @@` git says
 *   "insert after pre-image line 10", so the insertion touches [10, 10]. An insertion at the top of a file
 *   (`@@ -0,0 +1,2 @@` on an existing file, anchor 0) touches [1, 1], the line the new text is put before.
 *   The same anchor rule applies to a run of `+` lines between two context lines inside an ordinary hunk.
 * - Added files have no pre-image, hence no ranges; deleted files keep the ranges of the lines they remove.
 */

export type FileStatus = 'modified' | 'added' | 'deleted' | 'renamed' | 'copied';

/** 1-based inclusive pre-image line range. */
export type LineRange = [start: number, end: number];

export interface HunkLine {
  /** ' ' context, '-' removed, '+' added. */
  kind: ' ' | '-' | '+';
  text: string;
  /** Pre-image line number (context and removed lines). */
  oldLine: number | null;
  /** Post-image line number (context and added lines). */
  newLine: number | null;
  /** For added lines: the pre-image line they are inserted after (0 = before the first line). */
  afterOldLine: number | null;
}

export interface Hunk {
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  /** Text after the closing `@@` (git's function-context hint), trimmed. */
  header: string;
  lines: HunkLine[];
  /** Set when the pre-image (`-`/context) or post-image (`+`/context) side ends without a newline at EOF. */
  oldNoNewlineAtEof: boolean;
  newNoNewlineAtEof: boolean;
}

export interface FilePatch {
  /** The repo-relative path the ground truth names: pre-image path, except for added/copied files (post-image). */
  path: string;
  /** Pre-image path, null for an added file. */
  oldPath: string | null;
  /** Post-image path, null for a deleted file. */
  newPath: string | null;
  status: FileStatus;
  isBinary: boolean;
  oldMode: string | null;
  newMode: string | null;
  /** `similarity index` of a rename/copy, in percent. */
  similarity: number | null;
  hunks: Hunk[];
  /**
   * Whole-hunk pre-image ranges (context included), one per hunk, in hunk order, as the headers state them
   * (`locateHunks` moves them to where the patch really applies). Empty for added files; for a copy they are
   * lines of the copy source (`oldPath`).
   */
  hunkRanges: LineRange[];
  /** Pre-image lines actually removed/replaced (insertions by the anchor rule), merged and sorted. */
  preImageChangedRanges: LineRange[];
}

export class PatchParseError extends Error {
  constructor(
    readonly lineNumber: number,
    detail: string,
  ) {
    super(`patch line ${lineNumber}: ${detail}`);
    this.name = 'PatchParseError';
  }
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$/;

interface Section {
  startLine: number;
  gitA: string | null;
  gitB: string | null;
  minusPath: string | null | undefined; // undefined: no `---` line; null: /dev/null
  plusPath: string | null | undefined;
  renameFrom: string | null;
  renameTo: string | null;
  copyFrom: string | null;
  copyTo: string | null;
  newFileMode: string | null;
  deletedFileMode: string | null;
  oldMode: string | null;
  newMode: string | null;
  similarity: number | null;
  isBinary: boolean;
  hunks: Hunk[];
}

function newSection(startLine: number): Section {
  return {
    startLine,
    gitA: null,
    gitB: null,
    minusPath: undefined,
    plusPath: undefined,
    renameFrom: null,
    renameTo: null,
    copyFrom: null,
    copyTo: null,
    newFileMode: null,
    deletedFileMode: null,
    oldMode: null,
    newMode: null,
    similarity: null,
    isBinary: false,
    hunks: [],
  };
}

/** Decode a git C-style quoted path (`"a/sp ace\303\251"`): escapes and octal UTF-8 bytes. */
function unquoteCPath(quoted: string, lineNumber: number): { value: string; rest: string } {
  const bytes: number[] = [];
  let i = 1;
  const escapes: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };
  while (i < quoted.length) {
    const ch = quoted[i]!;
    if (ch === '"') {
      return { value: Buffer.from(bytes).toString('utf8'), rest: quoted.slice(i + 1) };
    }
    if (ch === '\\') {
      const next = quoted[i + 1];
      if (next !== undefined && /[0-7]/.test(next)) {
        const octal = quoted.slice(i + 1, i + 4);
        if (!/^[0-7]{3}$/.test(octal)) throw new PatchParseError(lineNumber, `bad octal escape in quoted path ${quoted}`);
        bytes.push(parseInt(octal, 8));
        i += 4;
        continue;
      }
      const code = next === undefined ? undefined : escapes[next];
      if (code === undefined) throw new PatchParseError(lineNumber, `bad escape \\${next ?? ''} in quoted path ${quoted}`);
      bytes.push(code);
      i += 2;
      continue;
    }
    bytes.push(...Buffer.from(ch, 'utf8'));
    i += 1;
  }
  throw new PatchParseError(lineNumber, `unterminated quoted path ${quoted}`);
}

function stripPrefix(path: string): string {
  return path.startsWith('a/') || path.startsWith('b/') ? path.slice(2) : path;
}

/** Path of a `---`/`+++` line: quoted or not, `/dev/null` → null, a trailing tab + timestamp dropped. */
function parseFileLinePath(raw: string, lineNumber: number): string | null {
  const text = raw.trimStart();
  if (text.length === 0) throw new PatchParseError(lineNumber, 'file header line has no path');
  let path: string;
  if (text.startsWith('"')) {
    path = unquoteCPath(text, lineNumber).value;
  } else {
    const tab = text.indexOf('\t');
    path = (tab >= 0 ? text.slice(0, tab) : text).trimEnd();
  }
  if (path === '/dev/null') return null;
  return stripPrefix(path);
}

/** Path of an extended header line (`rename from x`): no a/ b/ prefix, may be quoted. */
function parseHeaderPath(raw: string, lineNumber: number): string {
  const text = raw.trim();
  if (text.length === 0) throw new PatchParseError(lineNumber, 'extended header line has no path');
  return text.startsWith('"') ? unquoteCPath(text, lineNumber).value : text;
}

/**
 * Both paths of `diff --git a/X b/Y`. Unquoted paths may contain spaces, which makes the split ambiguous; git
 * resolves it by preferring the split where both sides name the same file, and so do we. Renames with spaces
 * are resolved later from `rename from/to` or `---`/`+++`.
 */
function parseGitHeaderPaths(rest: string, lineNumber: number): { a: string | null; b: string | null } {
  let a: string;
  let remainder: string;
  if (rest.startsWith('"')) {
    const q = unquoteCPath(rest, lineNumber);
    a = q.value;
    remainder = q.rest.trimStart();
  } else {
    const quoteAt = rest.indexOf(' "');
    if (quoteAt >= 0) {
      a = rest.slice(0, quoteAt);
      remainder = rest.slice(quoteAt + 1);
    } else {
      // Same-file split: "a/P b/P" has length 2|P| + 5.
      if ((rest.length - 1) % 2 === 0) {
        const half = (rest.length - 1) / 2;
        const left = rest.slice(0, half);
        const right = rest.slice(half + 1);
        if (rest[half] === ' ' && stripPrefix(left) === stripPrefix(right)) {
          return { a: stripPrefix(left), b: stripPrefix(right) };
        }
      }
      const split = rest.indexOf(' b/');
      if (split < 0) return { a: null, b: null };
      return { a: stripPrefix(rest.slice(0, split)), b: stripPrefix(rest.slice(split + 1)) };
    }
  }
  const b = remainder.startsWith('"') ? unquoteCPath(remainder, lineNumber).value : remainder;
  return { a: stripPrefix(a), b: stripPrefix(b) };
}

function mergeRanges(ranges: LineRange[]): LineRange[] {
  const sorted = [...ranges].sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  const merged: LineRange[] = [];
  for (const [start, end] of sorted) {
    const last = merged[merged.length - 1];
    if (last && start <= last[1] + 1) last[1] = Math.max(last[1], end);
    else merged.push([start, end]);
  }
  return merged;
}

/** Anchor rule for an insertion after pre-image line `after` (0 = top of file): see the module comment. */
export function insertionAnchorLine(after: number): number {
  return Math.max(after, 1);
}

function hunkRange(hunk: Hunk): LineRange {
  if (hunk.oldLines === 0) {
    const anchor = insertionAnchorLine(hunk.oldStart);
    return [anchor, anchor];
  }
  return [hunk.oldStart, hunk.oldStart + hunk.oldLines - 1];
}

function changedRanges(hunk: Hunk): LineRange[] {
  const ranges: LineRange[] = [];
  const lines = hunk.lines;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.kind === '-') {
      ranges.push([line.oldLine!, line.oldLine!]);
      continue;
    }
    if (line.kind !== '+') continue;
    // A run of added lines next to removed lines is a replacement, already covered by the removed lines.
    let j = i;
    while (j < lines.length && lines[j]!.kind === '+') j++;
    const before = lines[i - 1];
    const after = lines[j];
    const replaces = before?.kind === '-' || after?.kind === '-';
    if (!replaces) {
      const anchor = insertionAnchorLine(line.afterOldLine!);
      ranges.push([anchor, anchor]);
    }
    i = j - 1;
  }
  return ranges;
}

/** Whole-hunk and changed-line pre-image ranges of a file's hunks (none for an added file). */
export function preImageRanges(status: FileStatus, hunks: Hunk[]): { hunkRanges: LineRange[]; preImageChangedRanges: LineRange[] } {
  if (status === 'added') return { hunkRanges: [], preImageChangedRanges: [] };
  return { hunkRanges: hunks.map(hunkRange), preImageChangedRanges: mergeRanges(hunks.flatMap(changedRanges)) };
}

function finishSection(section: Section, endLine: number): FilePatch {
  const where = `file section starting at line ${section.startLine}`;
  if ((section.renameFrom === null) !== (section.renameTo === null)) {
    throw new PatchParseError(endLine, `${where} has only one of 'rename from'/'rename to'`);
  }
  if ((section.copyFrom === null) !== (section.copyTo === null)) {
    throw new PatchParseError(endLine, `${where} has only one of 'copy from'/'copy to'`);
  }
  const added = section.newFileMode !== null || section.minusPath === null;
  const deleted = section.deletedFileMode !== null || section.plusPath === null;
  if (added && deleted) throw new PatchParseError(endLine, `${where} is both a new and a deleted file`);

  let oldPath: string | null = added ? null : (section.renameFrom ?? section.copyFrom ?? section.minusPath ?? section.gitA ?? null);
  let newPath: string | null = deleted ? null : (section.renameTo ?? section.copyTo ?? section.plusPath ?? section.gitB ?? null);
  if (added && newPath === null) newPath = section.gitB;
  if (deleted && oldPath === null) oldPath = section.gitA;

  let status: FileStatus = 'modified';
  if (added) status = 'added';
  else if (deleted) status = 'deleted';
  else if (section.renameFrom !== null) status = 'renamed';
  else if (section.copyFrom !== null) status = 'copied';

  const path = status === 'added' || status === 'copied' ? newPath : oldPath;
  if (path === null || path.length === 0) {
    throw new PatchParseError(section.startLine, `${where}: cannot determine the file path from its headers`);
  }
  const { hunkRanges, preImageChangedRanges } = preImageRanges(status, section.hunks);
  return {
    path,
    oldPath,
    newPath,
    status,
    isBinary: section.isBinary,
    oldMode: section.oldMode ?? section.deletedFileMode,
    newMode: section.newMode ?? section.newFileMode,
    similarity: section.similarity,
    hunks: section.hunks,
    hunkRanges,
    preImageChangedRanges,
  };
}

/**
 * Parse a unified diff (git `diff --git` output, `format-patch` mails, or plain `diff -u`) into one FilePatch
 * per file section, in patch order. Text before the first section (commit message, mail headers) is skipped.
 * Throws PatchParseError naming the 1-based patch line for malformed input.
 */
export function parseUnifiedDiff(patch: string): FilePatch[] {
  if (typeof patch !== 'string') throw new TypeError(`parseUnifiedDiff: patch must be a string, got ${typeof patch}`);
  if (patch.trim().length === 0) throw new PatchParseError(1, 'patch is empty');
  const lines = patch.split('\n').map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();

  const state: ParseState = { lines, files: [], section: null, inBinaryPatch: false };
  let i = 0;
  while (i < lines.length) i = parseLineAt(state, i);
  closeSection(state, lines.length);
  if (state.files.length === 0) throw new PatchParseError(1, 'no file sections found (no `diff --git` or `---`/`+++` headers)');
  return state.files;
}

/** A parse under way: the patch's lines, the sections finished, the one open, and whether a binary payload is being skipped. */
interface ParseState {
  lines: string[];
  files: FilePatch[];
  section: Section | null;
  inBinaryPatch: boolean;
}

function closeSection(state: ParseState, endLine: number): void {
  if (state.section) state.files.push(finishSection(state.section, endLine));
  state.section = null;
  state.inBinaryPatch = false;
}

/** Reads the line at index `i` (with the lines a file header pair or a hunk takes); returns the index of the next one. */
function parseLineAt(state: ParseState, i: number): number {
  const line = state.lines[i]!;
  const lineNumber = i + 1;

  if (line.startsWith('diff --git ')) {
    closeSection(state, lineNumber);
    const paths = parseGitHeaderPaths(line.slice('diff --git '.length), lineNumber);
    const section = newSection(lineNumber);
    section.gitA = paths.a;
    section.gitB = paths.b;
    state.section = section;
    return i + 1;
  }

  // A plain `---`/`+++` pair opens a section when it does not belong to the current git section.
  if (line.startsWith('--- ') && state.lines[i + 1]?.startsWith('+++ ')) {
    const current = state.section;
    if (current === null || current.minusPath !== undefined || current.hunks.length > 0 || current.isBinary) {
      closeSection(state, lineNumber);
      state.section = newSection(lineNumber);
    }
    const open = state.section!;
    open.minusPath = parseFileLinePath(line.slice(4), lineNumber);
    open.plusPath = parseFileLinePath(state.lines[i + 1]!.slice(4), lineNumber + 1);
    return i + 2;
  }

  if (line.startsWith('@@')) {
    const open = state.section;
    if (open === null) throw new PatchParseError(lineNumber, `hunk header '${line}' appears before any file header`);
    if (open.minusPath === undefined) {
      throw new PatchParseError(lineNumber, `hunk header '${line}' has no '---'/'+++' file header before it`);
    }
    const hunk = parseHunkHeader(line, lineNumber);
    const next = readHunkBody(state.lines, i + 1, hunk, line);
    open.hunks.push(hunk);
    return next;
  }

  if (state.section !== null) readSectionLine(state, state.section, line, lineNumber);
  // Anything else (commit message, binary payload, blank separators, mail signature) is not diff content.
  return i + 1;
}

/** A hunk header `@@ -a[,b] +c[,d] @@ [section heading]`, as a hunk with no lines yet. */
function parseHunkHeader(line: string, lineNumber: number): Hunk {
  const m = HUNK_HEADER.exec(line);
  if (!m) {
    throw new PatchParseError(lineNumber, `malformed hunk header '${line}' (expected '@@ -a[,b] +c[,d] @@')`);
  }
  const hunk: Hunk = {
    oldStart: Number(m[1]),
    oldLines: m[2] === undefined ? 1 : Number(m[2]),
    newStart: Number(m[3]),
    newLines: m[4] === undefined ? 1 : Number(m[4]),
    header: (m[5] ?? '').trim(),
    lines: [],
    oldNoNewlineAtEof: false,
    newNoNewlineAtEof: false,
  };
  if (hunk.oldLines > 0 && hunk.oldStart === 0) {
    throw new PatchParseError(lineNumber, `hunk header '${line}' starts at pre-image line 0 but removes lines`);
  }
  return hunk;
}

/**
 * A line of an open section that is neither a file header nor a hunk: an extended git header, a binary marker,
 * or a diff line past a complete hunk (an error: the hunk's counts are wrong). Other lines are left alone.
 */
function readSectionLine(state: ParseState, open: Section, line: string, lineNumber: number): void {
  if (open.minusPath === undefined && open.hunks.length === 0 && !state.inBinaryPatch) {
    if (readExtendedHeader(open, line, lineNumber)) {
      if (line === 'GIT binary patch') state.inBinaryPatch = true;
      return;
    }
  }
  if (line.startsWith('Binary files ') && line.endsWith(' differ')) {
    open.isBinary = true;
    return;
  }
  if (line === 'GIT binary patch') {
    open.isBinary = true;
    state.inBinaryPatch = true;
    return;
  }
  if (open.hunks.length > 0 && !state.inBinaryPatch && /^[+ -]/.test(line) && line !== '-- ' && line !== '--') {
    const last = open.hunks[open.hunks.length - 1]!;
    throw new PatchParseError(
      lineNumber,
      `diff line '${line.slice(0, 60)}' after hunk '@@ -${last.oldStart},${last.oldLines} +${last.newStart},${last.newLines} @@' ` +
        'was complete: the hunk header counts are wrong',
    );
  }
}

/** Extended git headers; returns false when the line is not one. */
function readExtendedHeader(section: Section, line: string, lineNumber: number): boolean {
  const take = (prefix: string) => (line.startsWith(prefix) ? line.slice(prefix.length) : null);
  let v: string | null;
  if ((v = take('old mode ')) !== null) section.oldMode = v.trim();
  else if ((v = take('new mode ')) !== null) section.newMode = v.trim();
  else if ((v = take('new file mode ')) !== null) section.newFileMode = v.trim();
  else if ((v = take('deleted file mode ')) !== null) section.deletedFileMode = v.trim();
  else if ((v = take('rename from ')) !== null) section.renameFrom = parseHeaderPath(v, lineNumber);
  else if ((v = take('rename to ')) !== null) section.renameTo = parseHeaderPath(v, lineNumber);
  else if ((v = take('rename old ')) !== null) section.renameFrom = parseHeaderPath(v, lineNumber);
  else if ((v = take('rename new ')) !== null) section.renameTo = parseHeaderPath(v, lineNumber);
  else if ((v = take('copy from ')) !== null) section.copyFrom = parseHeaderPath(v, lineNumber);
  else if ((v = take('copy to ')) !== null) section.copyTo = parseHeaderPath(v, lineNumber);
  else if ((v = take('similarity index ')) !== null || (v = take('dissimilarity index ')) !== null) {
    const pct = /^(\d+)%$/.exec(v.trim());
    if (!pct) throw new PatchParseError(lineNumber, `malformed similarity line '${line}'`);
    if (line.startsWith('similarity')) section.similarity = Number(pct[1]);
  } else if (take('index ') !== null) {
    const mode = /^index [0-9a-f]+\.\.[0-9a-f]+ (\d+)$/.exec(line);
    if (mode && section.oldMode === null) {
      section.oldMode = mode[1]!;
      section.newMode = mode[1]!;
    }
  } else if (line === 'GIT binary patch' || (line.startsWith('Binary files ') && line.endsWith(' differ'))) {
    section.isBinary = true;
  } else return false;
  return true;
}

/** Read the body of `hunk` starting at lines[start]; returns the index of the first line after it. */
function readHunkBody(lines: string[], start: number, hunk: Hunk, headerText: string): number {
  let oldLeft = hunk.oldLines;
  let newLeft = hunk.newLines;
  let oldLine = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1; // last pre-image line consumed
  let newLine = hunk.newLines === 0 ? hunk.newStart : hunk.newStart - 1;
  let i = start;
  let lastKind: HunkLine['kind'] | null = null;
  while (i < lines.length && (oldLeft > 0 || newLeft > 0)) {
    const line = lines[i]!;
    const lineNumber = i + 1;
    const kind = line.length === 0 ? ' ' : line[0]!; // blank context lines whose trailing space was stripped
    if (kind === '\\') {
      markNoNewline(hunk, lastKind, lineNumber);
      i++;
      continue;
    }
    if (kind !== ' ' && kind !== '-' && kind !== '+') {
      throw new PatchParseError(
        lineNumber,
        `hunk '${headerText}' is truncated: expected ${oldLeft} more pre-image and ${newLeft} more post-image ` +
          `lines, found '${line.slice(0, 60)}'`,
      );
    }
    const text = line.slice(1);
    if (kind === ' ') {
      if (oldLeft === 0 || newLeft === 0) {
        throw new PatchParseError(lineNumber, `hunk '${headerText}' has more context lines than its header counts`);
      }
      oldLeft--;
      newLeft--;
      hunk.lines.push({ kind, text, oldLine: ++oldLine, newLine: ++newLine, afterOldLine: null });
    } else if (kind === '-') {
      if (oldLeft === 0) throw new PatchParseError(lineNumber, `hunk '${headerText}' removes more lines than its header counts`);
      oldLeft--;
      hunk.lines.push({ kind, text, oldLine: ++oldLine, newLine: null, afterOldLine: null });
    } else {
      if (newLeft === 0) throw new PatchParseError(lineNumber, `hunk '${headerText}' adds more lines than its header counts`);
      newLeft--;
      hunk.lines.push({ kind, text, oldLine: null, newLine: ++newLine, afterOldLine: oldLine });
    }
    lastKind = kind;
    i++;
  }
  if (oldLeft > 0 || newLeft > 0) {
    throw new PatchParseError(
      lines.length,
      `hunk '${headerText}' is truncated at end of patch: expected ${oldLeft} more pre-image and ${newLeft} more post-image lines`,
    );
  }
  if (lines[i]?.startsWith('\\')) {
    markNoNewline(hunk, lastKind, i + 1);
    i++;
  }
  return i;
}

function markNoNewline(hunk: Hunk, lastKind: HunkLine['kind'] | null, lineNumber: number): void {
  if (lastKind === null) throw new PatchParseError(lineNumber, `'\\ No newline at end of file' before any hunk line`);
  if (lastKind !== '+') hunk.oldNoNewlineAtEof = true;
  if (lastKind !== '-') hunk.newNoNewlineAtEof = true;
}

/**
 * Repo-relative paths of the files a patch changes: `a/`/`b/` stripped, deduplicated, in patch order. A rename
 * is named by its pre-image path; added (and copied) files are included by their new path — FilePatch.status
 * says which they are.
 */
export function goldFilesFromPatch(patch: string): string[] {
  const seen = new Set<string>();
  for (const file of parseUnifiedDiff(patch)) seen.add(file.path);
  return [...seen];
}
