import type { DownstreamInstance, InjectionConfiguration } from '../../../schemas/downstream';
import { goldFilesFromPatch } from '../../patch/parse-diff';
import { normalizeRepoPath } from '../../paths/normalize';

/**
 * Candidate-file injection (CodeGrep App. E, "Downstream injection": predictions "are formatted as a bulleted
 * <candidate_files> block appended to the issue description, byte-identical to the CodeGrep injection
 * format"; §4.3; CodeScout §6.1 for the oracle setting). The paper gives no wording beyond that, so the block
 * is exactly the tag, one `- path` line per file, and the closing tag:
 *
 *     <issue, trailing whitespace removed>
 *
 *     <candidate_files>
 *     - pkg/a.py
 *     - pkg/b.py
 *     </candidate_files>
 *
 * Everything but the bullet lines is the same for every retriever, so two configurations' prompts differ
 * only in the list. The `none` configuration (and any configuration left with no valid file) returns the
 * issue untouched, byte for byte: an empty block would be a prompt change that carries no information.
 */
export const CANDIDATE_FILES_OPEN = '<candidate_files>';
export const CANDIDATE_FILES_CLOSE = '</candidate_files>';

export interface DroppedCandidate {
  path: string;
  reason: string;
}

export interface Injection {
  /** The issue text the downstream agent gets. */
  prompt: string;
  /** The files listed, in order (normalised, deduplicated, cut to k). */
  files: string[];
  /** Candidates not listed, with why (bad path, duplicate, beyond k). */
  dropped: DroppedCandidate[];
}

/** Why a candidate path cannot be listed, or null when it can (after normalisation). */
function unusablePath(normalized: string): string | null {
  if (normalized === '') return 'empty path';
  if (normalized.startsWith('/')) return 'absolute path (not repository-relative)';
  if (normalized === '..' || normalized.startsWith('../')) return 'climbs out of the repository';
  // A control character (a newline above all) would end the bullet early or forge a closing tag.
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(normalized)) return 'contains a control character';
  if (normalized.includes('<') || normalized.includes('>')) return 'contains "<" or ">", which could break the block';
  return null;
}

/** Appends the `<candidate_files>` block for `candidates` (first `k` usable ones) to `issue`. */
export function injectCandidateFiles(issue: string, candidates: readonly string[], options: { k?: number } = {}): Injection {
  const { k } = options;
  if (k !== undefined && (!Number.isInteger(k) || k < 1)) throw new RangeError(`injectCandidateFiles: k must be an integer ≥ 1, got ${k}`);
  const files: string[] = [];
  const dropped: DroppedCandidate[] = [];
  const seen = new Set<string>();
  for (const raw of candidates) {
    if (typeof raw !== 'string') {
      dropped.push({ path: String(raw), reason: 'not a string' });
      continue;
    }
    const normalized = normalizeRepoPath(raw);
    const unusable = unusablePath(normalized);
    if (unusable) dropped.push({ path: raw, reason: unusable });
    else if (seen.has(normalized)) dropped.push({ path: raw, reason: 'duplicate' });
    else if (k !== undefined && files.length >= k) dropped.push({ path: raw, reason: `beyond k = ${k}` });
    else {
      seen.add(normalized);
      files.push(normalized);
    }
  }
  if (files.length === 0) return { prompt: issue, files, dropped };
  const block = [CANDIDATE_FILES_OPEN, ...files.map((f) => `- ${f}`), CANDIDATE_FILES_CLOSE].join('\n');
  return { prompt: `${issue.replace(/\s+$/, '')}\n\n${block}\n`, files, dropped };
}

/**
 * The prompt of one configuration for one instance: `none` → the issue unchanged; `oracle` → the gold
 * patch's files (in patch order); `predictions` and `agent` → `predictedFiles` (the retriever's or the served
 * policy's list, best first). A
 * predictions configuration without a prediction for the instance injects nothing, and says so in `dropped`
 * being empty and `files` being empty — the caller records it.
 */
export function promptForConfiguration(
  instance: Pick<DownstreamInstance, 'instance_id' | 'problem_statement' | 'patch'>,
  configuration: InjectionConfiguration,
  predictedFiles?: readonly string[],
): Injection {
  const k = configuration.k === undefined ? {} : { k: configuration.k };
  switch (configuration.source) {
    case 'none':
      return { prompt: instance.problem_statement, files: [], dropped: [] };
    case 'oracle': {
      if (instance.patch === undefined || instance.patch.trim() === '') {
        throw new Error(`configuration ${configuration.name} (oracle): instance ${instance.instance_id} has no gold patch`);
      }
      return injectCandidateFiles(instance.problem_statement, goldFilesFromPatch(instance.patch), k);
    }
    case 'predictions':
    case 'agent':
      return injectCandidateFiles(instance.problem_statement, predictedFiles ?? [], k);
  }
}
