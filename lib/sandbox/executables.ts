import { accessSync, constants, statSync } from 'node:fs';
import path from 'node:path';

const resolved = new Map<string, string | null>();

/**
 * The absolute path of a program found on PATH, or null. Only absolute PATH entries are searched, so a
 * program can never be picked up from the worktree (the subprocess's cwd) through an empty or relative entry.
 */
export function findExecutable(name: string): string | null {
  const cached = resolved.get(name);
  if (cached !== undefined) return cached;
  let found: string | null = null;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!path.isAbsolute(dir)) continue;
    const candidate = path.join(dir, name);
    try {
      if (statSync(candidate).isFile()) {
        accessSync(candidate, constants.X_OK);
        found = candidate;
        break;
      }
    } catch {
      // not here; keep looking
    }
  }
  resolved.set(name, found);
  return found;
}

/**
 * The environment every sandbox subprocess gets: PATH and the C locale, nothing else. No HOME (so ripgrep and
 * git read no per-user config), no GREP_OPTIONS/GREP_COLORS/RIPGREP_CONFIG_PATH, no secrets from the worker.
 * The C locale keeps GNU grep from declaring Latin-1 sources binary and makes sort orders byte orders.
 */
export function sandboxEnv(): NodeJS.ProcessEnv {
  const safePath = (process.env.PATH ?? '/usr/bin:/bin')
    .split(path.delimiter)
    .filter((dir) => path.isAbsolute(dir))
    .join(path.delimiter);
  return { PATH: safePath, LC_ALL: 'C' };
}
