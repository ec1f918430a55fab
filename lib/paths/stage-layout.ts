import path from 'node:path';

/**
 * A stage's folder in a run directory (`<runDir>/<stage>/`, as `root`) and the paths of what it keeps there:
 * each of `entries` (key → name inside the folder) joined onto it, under the same key.
 */
export function stageLayout<Entries extends Record<string, string>>(
  runDir: string,
  stage: string,
  entries: Entries,
): { root: string } & { [K in keyof Entries]: string } {
  const root = path.join(runDir, stage);
  const joined = Object.fromEntries(Object.entries(entries).map(([key, name]) => [key, path.join(root, name)]));
  return { root, ...joined } as { root: string } & { [K in keyof Entries]: string };
}
