import type { PreImageError, GoldLineRange, GroundTruth } from '../../schemas/ground-truth';
import { entitiesTouchedByFilePatch } from './entities';
import { locateHunks } from './locate-hunks';
import { parseUnifiedDiff, type FilePatch } from './parse-diff';

/** Files whose classes and functions we can name (CodeScout §3.1 is Python-only). */
export const isPythonPath = (path: string) => path.endsWith('.py');

/** Pre-image contents of a repo-relative path, or null when the file does not exist at the base commit. */
export type ReadPreImage = (path: string) => Promise<string | null>;

const needsEntities = (file: FilePatch) => isPythonPath(file.path) && (file.status === 'modified' || file.status === 'renamed');

/**
 * Ground truth of one gold patch (docs/design.md "Ground truth from patches"): changed files, pre-image hunk and changed-line ranges, and for
 * Python files the touched classes and functions. Added and copied files go to `newFiles` (no ranges: they
 * have no pre-image), deleted files to `deletedFiles`, so recipes can drop them (CodeScout §3.1 discards such
 * instances); neither gets entities, since a deleted file would name every definition it had.
 * Each changed file's pre-image is read to place hunks where they really apply (see locateHunks). A file whose
 * pre-image is missing or does not match the patch is listed in `preImageErrors`: its ranges keep the patch
 * header's numbers and it contributes no entities; the other files are unaffected.
 * Throws PatchParseError when the patch itself is malformed.
 */
export async function groundTruthForPatch(patch: string, readPreImage: ReadPreImage): Promise<GroundTruth> {
  const filePatches = parseUnifiedDiff(patch);
  const files: string[] = [];
  const lineRanges: GoldLineRange[] = [];
  const changedLineRanges: GoldLineRange[] = [];
  const modules: string[] = [];
  const functions: string[] = [];
  const newFiles: string[] = [];
  const deletedFiles: string[] = [];
  const preImageErrors: PreImageError[] = [];
  const addUnique = (list: string[], value: string) => {
    if (!list.includes(value)) list.push(value);
  };

  for (const file of filePatches) {
    addUnique(files, file.path);
    if (file.status === 'added' || file.status === 'copied') {
      addUnique(newFiles, file.path);
      continue;
    }
    if (file.status === 'deleted') addUnique(deletedFiles, file.path);
    let located = file;
    if (!file.isBinary && file.hunks.length > 0) {
      try {
        const source = await readPreImage(file.oldPath ?? file.path);
        if (source === null) throw new Error(`pre-image of ${file.oldPath ?? file.path} does not exist`);
        located = locateHunks(source, file);
        if (needsEntities(file)) {
          const touched = await entitiesTouchedByFilePatch(source, located);
          for (const m of touched.modules) addUnique(modules, m);
          for (const f of touched.functions) addUnique(functions, f);
        }
      } catch (error) {
        preImageErrors.push({ path: file.path, message: error instanceof Error ? error.message : String(error) });
      }
    }
    for (const [start, end] of located.hunkRanges) lineRanges.push({ path: file.path, start, end });
    for (const [start, end] of located.preImageChangedRanges) changedLineRanges.push({ path: file.path, start, end });
  }
  return { files, lineRanges, changedLineRanges, modules, functions, newFiles, deletedFiles, preImageErrors };
}
