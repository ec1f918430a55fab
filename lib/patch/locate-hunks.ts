import { preImageRanges, type FilePatch, type Hunk } from './parse-diff';

/** Lines as diff numbers them: split on LF, without the empty piece after a final newline. */
export function splitSourceLines(source: string): string[] {
  const lines = source.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Equal up to a trailing CR, so a CRLF file matches a patch whose CRs were normalised away, and back. */
export const sameLine = (a: string, b: string) => a === b || a.replace(/\r$/, '') === b.replace(/\r$/, '');

function shiftHunk(hunk: Hunk, delta: number): Hunk {
  if (delta === 0) return hunk;
  const shift = (n: number | null) => (n === null ? null : n + delta);
  return {
    ...hunk,
    oldStart: hunk.oldStart + delta,
    newStart: hunk.newStart + delta,
    lines: hunk.lines.map((l) => ({
      ...l,
      oldLine: shift(l.oldLine),
      newLine: shift(l.newLine),
      afterOldLine: shift(l.afterOldLine),
    })),
  };
}

function matchesAt(old: string[], expected: string[], at: number): boolean {
  for (let k = 0; k < expected.length; k++) if (!sameLine(old[at + k]!, expected[k]!)) return false;
  return true;
}

/**
 * Where each hunk of `file` really sits in `preImage`. Gold patches do not always apply at the line numbers
 * their headers state: SWE-bench applies them with `git apply`, which accepts a hunk whose context and removed
 * lines match a few lines away (e.g. sphinx-doc__sphinx-7462 applies at offset +9). Like git, we try the stated
 * position (moved by the offset of the previous hunk) first and then search outward, never before the end of
 * the previous hunk. Returns the file patch with hunks and ranges renumbered to the actual pre-image lines;
 * throws, naming the file and hunk, when a hunk matches nowhere.
 */
export function locateHunks(preImage: string, file: FilePatch): FilePatch {
  if (file.status === 'added' || file.hunks.length === 0) return file;
  const old = splitSourceLines(preImage);
  const located: Hunk[] = [];
  let offset = 0;
  let earliest = 0; // index of the first pre-image line after the previous hunk
  for (const hunk of file.hunks) {
    const expected = hunk.lines.filter((l) => l.kind !== '+').map((l) => l.text);
    const stated = (hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1) + offset;
    const last = old.length - expected.length;
    let found: number | null = null;
    if (expected.length === 0) {
      // A bare insertion has nothing to match: it goes where the header says.
      if (stated >= earliest && stated <= old.length) found = stated;
    } else {
      for (let distance = 0; found === null && (stated - distance >= earliest || stated + distance <= last); distance++) {
        for (const at of distance === 0 ? [stated] : [stated - distance, stated + distance]) {
          if (at >= earliest && at <= last && matchesAt(old, expected, at)) {
            found = at;
            break;
          }
        }
      }
    }
    if (found === null) {
      throw new Error(
        `${file.path}: hunk @@ -${hunk.oldStart},${hunk.oldLines} +${hunk.newStart},${hunk.newLines} @@ matches ` +
          `nowhere in the pre-image (${old.length} lines)`,
      );
    }
    const delta = found - (hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1);
    located.push(shiftHunk(hunk, delta));
    offset = delta;
    earliest = found + expected.length;
  }
  return { ...file, hunks: located, ...preImageRanges(file.status, located) };
}
