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
      glob = `/${glob.slice(root.length).replace(/^\/+/, '')}`;
      break;
    }
  }
  const body = glob.startsWith('!') ? glob.slice(1) : glob;
  if (body.split('/').includes('..')) {
    return { ok: false, message: `glob ${JSON.stringify(pattern)} uses '..'; patterns are relative to the repository root` };
  }
  return { ok: true, pattern: glob };
}
