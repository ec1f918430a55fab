import { sameLine, splitSourceLines } from './locate-hunks';
import type { FilePatch } from './parse-diff';

/**
 * The post-image of one file: its pre-image with the patch's hunks applied exactly where their line numbers
 * say (run `locateHunks` first for patches that apply at an offset). Context and removed lines are checked
 * against the pre-image, so a patch made for another version of the file fails loudly (naming the file, hunk
 * and line) instead of producing wrong entity attributions.
 */
export function applyFilePatch(preImage: string, file: FilePatch): string {
  const old = splitSourceLines(preImage);
  const out: string[] = [];
  let next = 0; // index into `old` of the first line not yet copied
  let noNewlineAtEof = !preImage.endsWith('\n') && preImage.length > 0;
  for (const hunk of file.hunks) {
    const start = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1;
    if (start < next || start > old.length) {
      throw new Error(`${file.path}: hunk @@ -${hunk.oldStart},${hunk.oldLines} @@ does not fit a pre-image of ${old.length} lines`);
    }
    out.push(...old.slice(next, start));
    next = start;
    for (const line of hunk.lines) {
      if (line.kind === '+') {
        out.push(line.text);
        continue;
      }
      const actual = old[next];
      if (actual === undefined || !sameLine(actual, line.text)) {
        throw new Error(
          `${file.path}: pre-image line ${next + 1} is ${JSON.stringify(actual ?? '<end of file>')} but the ` +
            `patch expects ${JSON.stringify(line.text)} (hunk @@ -${hunk.oldStart},${hunk.oldLines} @@)`,
        );
      }
      if (line.kind === ' ') out.push(actual);
      next++;
    }
    if (hunk.oldNoNewlineAtEof || hunk.newNoNewlineAtEof) noNewlineAtEof = hunk.newNoNewlineAtEof;
  }
  out.push(...old.slice(next));
  if (out.length === 0) return '';
  return out.join('\n') + (noNewlineAtEof ? '' : '\n');
}
