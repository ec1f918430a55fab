import { createHash } from 'node:crypto';
import { parseInstanceRecord, problemStatementOf, type FileChange, type InstanceRow } from '../../schemas/instances';
import type { RowRecord } from '../../schemas/rows';
import {
  INSTANCE_SKIP_REASONS,
  type CatmFile,
  type CatmLabel,
  type InstanceSkipReason,
  type Sample,
  type SampleFileChangeTargets,
  type SamplesSummary,
} from '../../schemas/samples';
import { normalizeRepoPath } from '../paths/normalize';
import { targetsFromFileChanges } from '../patch/codescout-layout';
import { goldFilesFromPatch } from '../patch/parse-diff';

const MAX_EXAMPLES = 50;

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

/**
 * G(x) = Gpatch(x) ∪ {f ∈ L(x) : w_f ≥ 0.15} (CodeGrep §3.4, "Ground truth structure"): gold files first, in
 * patch order, then the CATM files not already there, in the given order. No path appears twice.
 */
export function mergeTargetFiles(goldFiles: readonly string[], catmFiles: readonly Pick<CatmFile, 'path'>[]): string[] {
  return [...new Set([...goldFiles, ...catmFiles.map((f) => f.path)])];
}

type IndexedLabel = CatmFile & { repo: string };

/**
 * The retained labels of every instance, in memory: they are few (one entry per retained (trajectory, path)),
 * unlike the instance rows, which are streamed.
 */
export class RetainedLabelIndex {
  readonly byInstance = new Map<string, IndexedLabel[]>();
  labelsRead = 0;
  labelsRetained = 0;

  add(label: CatmLabel): void {
    this.labelsRead++;
    if (!label.retained) return;
    this.labelsRetained++;
    const entry: IndexedLabel = {
      path: normalizeRepoPath(label.path),
      weight: label.weight,
      trajectoryId: label.trajectoryId,
      postReasoningTokens: label.postReasoningTokens,
      verdict: label.verdict,
      repo: label.repo,
    };
    const list = this.byInstance.get(label.instanceId);
    if (list === undefined) this.byInstance.set(label.instanceId, [entry]);
    else list.push(entry);
  }
}

export async function indexRetainedLabels(labels: Iterable<CatmLabel> | AsyncIterable<CatmLabel>): Promise<RetainedLabelIndex> {
  const index = new RetainedLabelIndex();
  for await (const label of labels) index.add(label);
  return index;
}

/**
 * One catmFiles entry per path: the label with the highest weight over the instance's trajectories (ties:
 * the first seen). Sorted by weight descending, then path, so the order is stable across runs.
 */
function strongestPerPath(labels: readonly IndexedLabel[]): CatmFile[] {
  const best = new Map<string, IndexedLabel>();
  for (const label of labels) {
    const current = best.get(label.path);
    if (current === undefined || label.weight > current.weight) best.set(label.path, label);
  }
  return [...best.values()]
    .sort((a, b) => b.weight - a.weight || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map(({ path, weight, trajectoryId, postReasoningTokens, verdict }) => ({ path, weight, trajectoryId, postReasoningTokens, verdict }));
}

export type SamplesRun = {
  /** One sample per good instance row, in input order. */
  samples: AsyncGenerator<Sample, void, undefined>;
  /** Counts so far; final (labelsWithoutInstance included) once `samples` is exhausted. */
  summary(): SamplesSummary;
};

type SampleCounts = Record<'samplesWithCatm' | 'catmOnlyTargets' | 'labelsUsed' | 'labelsRepoMismatch', number>;

/**
 * One instance's sample: its gold files merged with its retained CATM labels (the strongest per path). Labels
 * that name another repo than the instance are counted and noted, never merged.
 */
function toSample(
  instance: InstanceRow,
  { goldFiles, fileChangeTargets }: { goldFiles: string[]; fileChangeTargets: SampleFileChangeTargets | null },
  labels: RetainedLabelIndex,
  counts: SampleCounts,
  note: (ordinal: number | null, reason: string, detail: string) => void,
): Sample {
  const own = labels.byInstance.get(instance.instance_id) ?? [];
  const sameRepo = own.filter((l) => l.repo === instance.repo);
  if (sameRepo.length < own.length) {
    counts.labelsRepoMismatch += own.length - sameRepo.length;
    note(
      null,
      'labelRepoMismatch',
      `${own.length - sameRepo.length} label(s) of ${instance.instance_id} name another repo than ${instance.repo}`,
    );
  }
  counts.labelsUsed += sameRepo.length;
  const catmFiles = strongestPerPath(sameRepo);
  const targetFiles = mergeTargetFiles(goldFiles, catmFiles);
  if (catmFiles.length > 0) counts.samplesWithCatm++;
  counts.catmOnlyTargets += targetFiles.length - goldFiles.length;
  const usePatch = instance.use_patch === true;
  return {
    instanceId: instance.instance_id,
    repo: instance.repo,
    baseCommit: usePatch ? null : instance.base_commit!,
    problemStatement: problemStatementOf(instance)!,
    bugPatch: usePatch ? instance.patch : null,
    bugPatchSha256: usePatch ? sha256Hex(instance.patch) : null,
    goldFiles,
    catmFiles,
    targetFiles,
    goldPatch: usePatch ? null : instance.patch,
    fileChangeTargets,
  };
}

/** What ground truth takes from CodeScout's `file_changes`: the targets at each level (see targetsFromFileChanges). */
function sampleTargets(fileChanges: readonly FileChange[]): SampleFileChangeTargets {
  const { files, modules, functions } = targetsFromFileChanges(fileChanges);
  return { files, modules, functions };
}

/**
 * Streams instance rows into samples. An instance with no retained label keeps its gold-only target set. A bad
 * instance row (bad column, unparseable patch, repeated id) is counted and skipped; the others go on.
 */
export function buildSamples(instances: AsyncIterable<RowRecord>, labels: RetainedLabelIndex, opts: { source?: string } = {}): SamplesRun {
  const source = opts.source ?? 'instances';
  const skipped = Object.fromEntries(INSTANCE_SKIP_REASONS.map((r) => [r, 0])) as Record<InstanceSkipReason, number>;
  const examples: SamplesSummary['examples'] = [];
  const sampled = new Set<string>();
  const counts = { instancesRead: 0, samplesWritten: 0, samplesWithCatm: 0, catmOnlyTargets: 0, labelsUsed: 0, labelsRepoMismatch: 0 };
  let labelsWithoutInstance = 0;
  let finished = false;

  const note = (ordinal: number | null, reason: string, detail: string): void => {
    if (examples.length < MAX_EXAMPLES) examples.push({ ordinal, reason, detail });
  };
  const skip = (reason: InstanceSkipReason, ordinal: number, detail: string): void => {
    skipped[reason]++;
    note(ordinal, reason, detail);
  };

  async function* samples(): AsyncGenerator<Sample, void, undefined> {
    for await (const record of instances) {
      counts.instancesRead++;
      const parsed = parseInstanceRecord(record, source);
      if (!parsed.ok) {
        skip(parsed.field === null ? 'malformedRow' : `missingOrInvalid:${parsed.field}`, parsed.ordinal, parsed.message);
        continue;
      }
      const { instance } = parsed;
      if (sampled.has(instance.instance_id)) {
        skip(
          'duplicateInstanceId',
          record.ordinal,
          `${source} row ${record.ordinal}: instance ${instance.instance_id} already has a sample; the first usable row is kept`,
        );
        continue;
      }
      let goldFiles: string[];
      const fileChangeTargets = instance.file_changes ? sampleTargets(instance.file_changes) : null;
      try {
        goldFiles = goldFilesFromPatch(instance.patch);
        // A use_patch row's `patch` introduces the bug; the files the fix must touch are its `file_changes`
        // (CodeScout's `target`), the same files when both are there.
        const labelled = instance.use_patch === true ? (fileChangeTargets?.files ?? []) : [];
        if (labelled.length > 0) goldFiles = labelled;
      } catch (err) {
        skip(
          'unparseablePatch',
          record.ordinal,
          `${source} row ${record.ordinal} (${instance.instance_id}): column patch: ${(err as Error).message}`,
        );
        continue;
      }
      counts.samplesWritten++;
      sampled.add(instance.instance_id);
      yield toSample(instance, { goldFiles, fileChangeTargets }, labels, counts, note);
    }
    for (const [instanceId, list] of labels.byInstance) {
      if (sampled.has(instanceId)) continue;
      labelsWithoutInstance += list.length;
      note(null, 'labelWithoutInstance', `${list.length} retained label(s) of ${instanceId}, which is not a usable row of ${source}`);
    }
    finished = true;
  }

  return {
    samples: samples(),
    summary: () => ({
      instancesRead: counts.instancesRead,
      instancesSkipped: { ...skipped },
      samplesWritten: counts.samplesWritten,
      samplesWithCatm: counts.samplesWithCatm,
      catmOnlyTargets: counts.catmOnlyTargets,
      labelsRead: labels.labelsRead,
      labelsRetained: labels.labelsRetained,
      labelsNotRetained: labels.labelsRead - labels.labelsRetained,
      labelsUsed: counts.labelsUsed,
      labelsRepoMismatch: counts.labelsRepoMismatch,
      labelsWithoutInstance: finished ? labelsWithoutInstance : 0,
      examples: examples.map((e) => ({ ...e })),
    }),
  };
}

/**
 * Why a samples pass that read instance rows wrote none, or null when it wrote some (or read none): every skip
 * reason with its count, then the first examples, e.g. `no sample from the 100 rows of instances x.parquet:
 * skipped missingOrInvalid:base_commit 100 (row 1: column base_commit: …)`. A stage that turned a non-empty
 * input into nothing has failed, whatever its exit status would otherwise say.
 */
export function noSamplesMessage(summary: SamplesSummary, source: string): string | null {
  if (summary.samplesWritten > 0 || summary.instancesRead === 0) return null;
  const reasons = Object.entries(summary.instancesSkipped)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `${reason} ${n}`);
  const firstOf = new Map<string, string>();
  for (const e of summary.examples) if (!firstOf.has(e.reason)) firstOf.set(e.reason, e.detail);
  const examples = [...firstOf.values()].slice(0, 3);
  return (
    `no sample from the ${summary.instancesRead} rows of ${source}: skipped ${reasons.join(', ') || 'none (no row was usable)'}` +
    (examples.length > 0 ? `. First of each: ${examples.join('; ')}` : '')
  );
}
