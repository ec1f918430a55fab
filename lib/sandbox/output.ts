import { PAPER_LIMITS } from './limits';

/**
 * Text a tool produced, made safe to show the model: CRLF becomes LF, everything from the first NUL byte on
 * is dropped (it is binary data; the caller is told via `binaryCut`), and other control characters except
 * tab and newline become U+FFFD so no terminal escape sequence reaches the transcript.
 */
export function sanitizeText(text: string): { text: string; binaryCut: boolean } {
  const nul = text.indexOf('\0');
  const kept = nul === -1 ? text : text.slice(0, nul);
  return {
    // eslint-disable-next-line no-control-regex
    text: kept.replace(/\r\n/g, '\n').replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '\uFFFD'),
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
 * Joins `body` and trailing `notes` (truncation markers) into at most `limit` characters (SPEC §5: 4096).
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
