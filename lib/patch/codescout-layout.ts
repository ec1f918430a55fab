import { dedupeEntityIds, dedupePaths } from '../paths/normalize';
import type { FileChange } from '../../schemas/instances';

/**
 * Localization targets from CodeScout's instance layout (`file_changes`, schemas/instances.ts), in this
 * project's naming, where the levels are (lib/patch/entities.ts):
 *
 *   files      every changed file
 *   modules    classes only: `file.py:Class`
 *   functions  methods and top-level functions: `file.py:Class.method`, `file.py:func`
 *
 * LocAgent's scripts (which CodeScout §3.1 starts from) also count a top-level function as a module
 * (`file.py:func` in edited_modules). CodeScout's own scoring of an answer adds a module only for a
 * `class_name` (lib/metrics/levels.ts locationsToSets), so such an entry could never be predicted: it is kept
 * as a function and dropped from the modules here. `added_*` are not targets (nothing to find before the
 * patch) and are ignored.
 */
export interface FileChangeTargets {
  files: string[];
  modules: string[];
  functions: string[];
  /** edited_modules entries that are top-level functions (LocAgent's convention), not kept as modules. */
  topLevelFunctionModules: string[];
}

export function targetsFromFileChanges(fileChanges: readonly FileChange[]): FileChangeTargets {
  const files = dedupePaths(fileChanges.map((c) => c.file));
  const functions = dedupeEntityIds(fileChanges.flatMap((c) => c.changes.edited_entities));
  const topLevelFunctions = new Set(functions.filter((id) => !id.slice(id.lastIndexOf(':') + 1).includes('.')));
  const editedModules = dedupeEntityIds(fileChanges.flatMap((c) => c.changes.edited_modules));
  return {
    files,
    modules: editedModules.filter((m) => !topLevelFunctions.has(m)),
    functions,
    topLevelFunctionModules: editedModules.filter((m) => topLevelFunctions.has(m)),
  };
}
