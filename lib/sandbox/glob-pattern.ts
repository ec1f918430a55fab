import path from 'node:path';
import { isInside } from './paths';

/**
 * Turns the model's pattern into a glob relative to the root. An absolute pattern that starts with the root
 * (as given or canonical) is made relative; any other leading '/' anchors at the root (gitignore style), so
 * '/etc/*' can only ever look inside the repository. '..' segments are refused.
 */
export function normalizeGlobPattern(
  pattern: string,
  givenRoot: string,
  canonical: string,
): { ok: true; pattern: string } | { ok: false; message: string } {
  let glob = pattern;
  for (const root of [canonical, path.resolve(givenRoot)]) {
    if (glob !== root && isInside(root, glob)) {
      glob = `/${trimLeadingSlashes(glob.slice(root.length))}`;
      break;
    }
  }
  const body = glob.startsWith('!') ? glob.slice(1) : glob;
  if (body.split('/').includes('..')) {
    return { ok: false, message: `glob ${JSON.stringify(pattern)} uses '..'; patterns are relative to the repository root` };
  }
  return { ok: true, pattern: glob };
}

/**
 * `text` without its leading '/' characters. A loop, not `replace(/^\/+/)`: the model's patterns are
 * trimmed with linear scans only (a `/\/+$/` replace is quadratic in a long run of slashes).
 */
export function trimLeadingSlashes(text: string): string {
  let start = 0;
  while (start < text.length && text.charCodeAt(start) === 0x2f) start++;
  return text.slice(start);
}

/** `text` without its trailing '/' characters (a linear scan; see trimLeadingSlashes). */
export function trimTrailingSlashes(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0x2f) end--;
  return text.slice(0, end);
}
