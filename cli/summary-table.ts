import type { CatmSummary } from '../schemas/catm';
import type { EnvironmentResult } from '../schemas/environment';

function table(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`).join('\n');
}

function reasons(counts: Record<string, number>): string {
  const entries = Object.entries(counts).filter(([, n]) => n > 0);
  return entries.length === 0 ? '0' : entries.map(([reason, n]) => `${reason} ${n}`).join(', ');
}

const fixed = (value: number | null, digits = 2) => (value === null ? '—' : value.toFixed(digits));

/** The CATM stage summary (CodeGrep §3.4, Table 5 layout) as text for the terminal. */
export function formatCatmSummary(summary: CatmSummary): string {
  const { mining, judge, weighting } = summary;
  return table([
    ['trajectories read', String(mining.rowsRead)],
    ['rows skipped', reasons(mining.rowsSkipped)],
    ['view calls', String(mining.viewCalls)],
    ['views skipped', reasons(mining.viewsSkipped)],
    ['views mined', String(mining.viewsMined)],
    ['candidates (trajectory, file)', String(mining.candidates)],
    [`after ${mining.minReasoningTokens}-token filter`, String(mining.candidatesAfterTokenFilter)],
    ['judge mode', judge.mode === 'none' ? 'none (offline: every candidate kept, verdict skipped)' : 'llm'],
    ['RELEVANT', String(judge.relevant)],
    ['NOT_RELEVANT', String(judge.notRelevant)],
    ['defaulted (kept)', String(judge.defaulted)],
    ['skipped (kept)', String(judge.skipped)],
    ['judge errors (defaulted)', String(judge.errors)],
    ['resumed from shards', String(judge.resumed)],
    ['β (median tokens)', fixed(weighting.beta, 1)],
    ['µraw', fixed(weighting.muRaw, 4)],
    ['retained (w ≥ 0.15)', `${weighting.retained} of ${weighting.weighted} (${fixed(weighting.retentionPct, 1)}%)`],
    ['instances read', String(weighting.instancesRead)],
    ['instances skipped', reasons(weighting.instancesSkipped)],
    ['samples written', `${weighting.samplesWritten} (${weighting.samplesWithCatm} with CATM labels)`],
  ]);
}

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/**
 * The samples the environment dropped (`onUnavailable: skip`), one line per repository and reason with the
 * instances, so a reader sees what is missing and why without opening environment/dropped.parquet.
 */
function droppedRows(m: EnvironmentResult['materialize']): [string, string][] {
  if (m.droppedSamples === 0) return [];
  const groups = new Map<string, string[]>();
  for (const d of m.dropped) {
    const key = `${d.repo}: ${d.reason}`;
    groups.set(key, [...(groups.get(key) ?? []), d.instanceId]);
  }
  const rows: [string, string][] = [['dropped (onUnavailable: skip)', `${m.droppedSamples} samples of ${m.failed} unavailable commits; the rest go on`]];
  for (const [why, ids] of groups) {
    const shortWhy = why.length > 160 ? `${why.slice(0, 157)}…` : why;
    rows.push(['', `${ids.length} × ${shortWhy}`]);
  }
  if (m.dropped.length < m.droppedSamples) rows.push(['', `… ${m.droppedSamples - m.dropped.length} more in environment/dropped.parquet`]);
  return rows;
}

/** The environment stage: worktrees and ground truth. */
export function formatEnvironmentSummary(result: EnvironmentResult): string {
  const m = result.materialize;
  const g = result.groundTruth;
  return table([
    ['commits', `${m.commits} in ${m.repos} repositories (${m.created} created, ${m.reused} reused, ${m.repaired} repaired, ${m.failed} failed)`],
    ['median worktree ready', m.medianMs === null ? '—' : `${m.medianMs.toFixed(0)} ms`],
    ['disk', `bare ${mib(m.bareBytes)} + worktrees ${mib(m.worktreeBytes)} vs ${mib(m.estimatedFullClonesBytes)} as full clones`],
    ...droppedRows(m),
    ['ground truth', `${g.withGroundTruth} of ${g.samples - g.withoutWorktree} samples (${g.patchErrors} patch errors)`],
    ['files / classes / functions', `${g.files} / ${g.modules} / ${g.functions}`],
    ['worktrees', result.worktrees.uri],
    ...(result.dropped ? [['dropped samples', `${result.dropped.uri} (${result.dropped.rows} rows)`] as [string, string]] : []),
    ['samples (with ground truth)', result.samples.uri],
  ]);
}
