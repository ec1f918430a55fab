import { PAPER_LIMITS } from './limits';

/**
 * Characters that must not reach the transcript as themselves: C0 controls except tab and newline, DEL,
 * every C1 control (U+0080-U+009F: U+009B is a one-character CSI that starts a terminal escape sequence),
 * the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: they reorder what
 * the reader sees, as in "Trojan Source"), and zero-width or invisible formatting characters (U+00AD,
 * U+200B-U+200D, U+2060-U+2064, U+FEFF: they hide text or make two names look identical). A character
 * class: one test per character, no backtracking.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE_CHARS = /[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

/** Every UNSAFE_CHARS character (and, with `newlines`, '\t' and '\n' too) replaced by `replacement`. */
export function replaceUnsafeChars(text: string, replacement: string, newlines = false): string {
  const replaced = text.replace(UNSAFE_CHARS, replacement);
  return newlines ? replaced.replace(/[\t\n]/g, replacement) : replaced;
}

/**
 * Text a tool produced, made safe to show the model: CRLF becomes LF, everything from the first NUL byte on
 * is dropped (it is binary data; the caller is told via `binaryCut`), and every UNSAFE_CHARS character
 * becomes U+FFFD, so no terminal escape sequence, reordering or hidden character reaches the transcript.
 */
export function sanitizeText(text: string): { text: string; binaryCut: boolean } {
  const nul = text.indexOf('\0');
  const kept = nul === -1 ? text : text.slice(0, nul);
  return {
    text: replaceUnsafeChars(kept.replaceAll('\r\n', '\n'), '\uFFFD'),
    binaryCut: nul !== -1,
  };
}

/** Cuts `text` to `limit` characters without splitting a UTF-16 surrogate pair. */
export function cutChars(text: string, limit: number): string {
  if (text.length <= limit) return text;
  let end = Math.max(0, limit);
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return text.slice(0, end);
}

export interface Fitted {
  output: string;
  /** True when some of `body` was cut to fit. */
  cut: boolean;
  /** The marker that explains the cut, when there was one. */
  cutNote?: string;
}

function joinLines(a: string, b: string): string {
  return a && b ? `${a}\n${b}` : a || b;
}

/**
 * Joins `body` and trailing `notes` (truncation markers) into at most `limit` characters (docs/design.md "Tools": 4096).
 * When they do not fit, the body is cut, at the last line break when one is in the second half of the room
 * (else mid-line), and `cutNote(shownBody, totalChars)` says what was cut; the notes are always kept whole.
 */
export function fitOutput(
  body: string,
  notes: string[] = [],
  cutNote: (shownBody: string, totalChars: number) => string = (shown, total) =>
    `[output cut: first ${shown.length} of ${total} characters shown]`,
  limit: number = PAPER_LIMITS.maxOutputChars,
): Fitted {
  const tail = notes.join('\n');
  const whole = joinLines(body, tail);
  if (whole.length <= limit) return { output: whole, cut: false };
  // cutNote(body) has the widest numbers any cut can produce, so reserving its length is always enough.
  const reserve = joinLines(cutNote(body, body.length), tail).length + 1;
  const room = Math.max(0, limit - reserve);
  let shown = cutChars(body, room);
  const lastBreak = shown.lastIndexOf('\n');
  if (lastBreak > room / 2) shown = shown.slice(0, lastBreak);
  const note = cutNote(shown, body.length);
  return { output: cutChars(joinLines(shown, joinLines(note, tail)), limit), cut: true, cutNote: note };
}
