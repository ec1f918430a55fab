import type { CatmSummary } from '../schemas/catm';
import type { EnvironmentResult } from '../schemas/environment';
import type { PipelineResult } from '../workflows/pipeline';

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
  const rows: [string, string][] = [
    ['dropped (onUnavailable: skip)', `${m.droppedSamples} samples of ${m.failed} unavailable commits; the rest go on`],
  ];
  for (const [why, ids] of groups) {
    const shortWhy = why.length > 160 ? `${why.slice(0, 157)}…` : why;
    rows.push(['', `${ids.length} × ${shortWhy}`]);
  }
  if (m.dropped.length < m.droppedSamples) rows.push(['', `… ${m.droppedSamples - m.dropped.length} more in environment/dropped.parquet`]);
  return rows;
}

/**
 * Disk: this run's own trees (its worktrees and the bare repositories they use), then the shared folders every
 * run adds to (cacheDir, worktreesDir), then the budget when one is set.
 */
function diskRows(m: EnvironmentResult['materialize']): [string, string][] {
  const rows: [string, string][] = [];
  if (m.run)
    rows.push([
      'disk (this run)',
      `${m.run.worktrees} worktrees ${mib(m.run.worktreeBytes)} + bare ${mib(m.run.bareBytes)} (${m.run.repos} repositories)`,
    ]);
  rows.push([
    m.run ? 'disk (shared folders)' : 'disk',
    `bare ${mib(m.bareBytes)} + worktrees ${mib(m.worktreeBytes)} vs ${mib(m.estimatedFullClonesBytes)} as full clones`,
  ]);
  if (m.budget)
    rows.push([
      'disk budget',
      `${mib(m.budget.maxBytes)} for worktrees: ${m.budget.removedWorktrees} idle removed (${mib(m.budget.removedBytes)}), ${mib(m.budget.bytesAfter)} now` +
        (m.budget.overBudget ? '; still over: the rest are in use' : ''),
    ]);
  return rows;
}

/** The environment stage: worktrees and ground truth. */
export function formatEnvironmentSummary(result: EnvironmentResult): string {
  const m = result.materialize;
  const g = result.groundTruth;
  return table([
    [
      'commits',
      `${m.commits} in ${m.repos} repositories (${m.created} created, ${m.reused} reused, ${m.repaired} repaired, ${m.failed} failed)`,
    ],
    ['median worktree ready', m.medianMs === null ? '—' : `${m.medianMs.toFixed(0)} ms`],
    ...diskRows(m),
    ...droppedRows(m),
    ['ground truth', `${g.withGroundTruth} of ${g.samples - g.withoutWorktree} samples (${g.patchErrors} patch errors)`],
    ['files / classes / functions', `${g.files} / ${g.modules} / ${g.functions}`],
    ['worktrees', result.worktrees.uri],
    ...(result.dropped ? [['dropped samples', `${result.dropped.uri} (${result.dropped.rows} rows)`] as [string, string]] : []),
    ['samples (with ground truth)', result.samples.uri],
  ]);
}

/** What the last screen of a run needs beyond the pipeline's result. */
export interface FinalScreenContext {
  runDir: string;
  webUi: string;
  /** Whether the config asked for the LLM judge and the downstream stage. */
  judgeMode: 'llm' | 'none';
  stages: readonly string[];
  /** The evaluation's retrievers, to say how a bounded dense retriever was run. */
  retrievers?: readonly { name: string; kind: string; bm25Candidates?: number; maxChunksPerFile?: number; modelDir?: string }[];
  /** The run is a toy (the learn demo): what kind, said under the stages. */
  toyTask?: string;
}

const estimate = (e: { value: number | null; ci: { low: number; high: number } | null }) =>
  e.value === null ? '—' : `${e.value.toFixed(3)}${e.ci ? ` [${e.ci.low.toFixed(2)}, ${e.ci.high.toFixed(2)}]` : ''}`;

/**
 * The one screen a run ends on: what ran, the retrieval table (CodeGrep Table 2 and CodeScout Table 3's file
 * level, with bootstrap intervals), where the report, the Web UI and the artifacts are, and what an endpoint
 * would add (the LLM judge, downstream injection) with the config lines that turn them on.
 */
export function formatFinalScreen(result: PipelineResult, context: FinalScreenContext): string {
  const rule = '═'.repeat(100);
  const lines: string[] = [rule, `codegrep run ${result.runId}`, `  stages     ${stageCells(result).join('  ·  ')}`];
  if (context.toyTask) lines.push(`  toy        ${context.toyTask}`);
  const evaluation = result.evaluation;
  if (evaluation) {
    lines.push(...retrievalTable(evaluation.summaryValues));
    lines.push(...servedPolicyLines(result, evaluation.summaryValues), ...boundedDenseLines(context.retrievers ?? []));
    lines.push(
      '',
      `  report     ${evaluation.report.html}`,
      `             ${evaluation.report.markdown}  (Table 2 / Table 3 with intervals, histograms, P–R scatter)`,
    );
  }
  if (result.training) lines.push(`  training   ${result.training.report.html}`);
  lines.push(
    `  Web UI     ${context.webUi}`,
    `  artifacts  ${context.runDir}/  (Parquet + manifest per stage: ${result.outcomes.map((o) => `${o.stage}/`).join(', ')})`,
  );
  lines.push(...notRunLines(context));
  lines.push(rule);
  return lines.join('\n');
}

/** Each stage with its status, and what a reader must know about it (samples kept, a smoke run's meaningless numbers). */
function stageCells(result: PipelineResult): string[] {
  return result.outcomes.map((o) => {
    const mark = o.status === 'completed' ? '✓' : o.status === 'failed' ? '✗ failed' : '– skipped';
    const note =
      o.stage === 'environment' && result.environment
        ? ` (${result.environment.groundTruth.withGroundTruth} samples${result.environment.materialize.droppedSamples > 0 ? `, ${result.environment.materialize.droppedSamples} dropped` : ''})`
        : o.stage === 'training' && result.training?.report.smokeRun
          ? ' (SMOKE RUN: tiny random model, numbers mean nothing)'
          : '';
    return `${o.stage} ${mark}${note}`;
  });
}

type EvaluationSummary = NonNullable<PipelineResult['evaluation']>['summaryValues'];

/** The retrieval table, one row per retriever with bootstrap intervals, then the retrievers that failed. */
function retrievalTable(s: EvaluationSummary): string[] {
  const confidence = Math.round(s.bootstrap.confidence * 100);
  const header = ['retriever', `Fβ mean`, 'Fβ median', 'precision', 'recall', `Fβ≥${s.highQualityThreshold}`, 'file F1'];
  const rows = s.retrievers.map((r) => [
    `${r.name} (${r.kind}${r.failed ? `, ${r.failed} failed` : ''})`,
    estimate(r.table2.fBetaMean),
    estimate(r.table2.fBetaMedian),
    estimate(r.table2.precision),
    estimate(r.table2.recall),
    estimate(r.table2.shareHighQuality),
    estimate(r.table3.file.f1),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const format = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd();
  return [
    '',
    `  Retrieval on ${s.instances} instances (${s.fileTarget} files; Fβ β = ${s.beta}; ${confidence} % bootstrap intervals, ${s.bootstrap.samples} resamples)`,
    format(header),
    format(widths.map((w) => '─'.repeat(w))),
    ...rows.map(format),
    ...s.failedRetrievers.map((failed) => `  ${failed.name}: failed — ${failed.reason}`),
  ];
}

/** Which checkpoint each trained policy served, flagged when it is this run's toy model. */
function servedPolicyLines(result: PipelineResult, s: EvaluationSummary): string[] {
  return (s.servedPolicies ?? []).map((p) => {
    const toy = result.training?.report.smokeRun && p.runId === result.runId ? ' — a toy model on a CPU: its numbers mean nothing' : '';
    return `  ${p.retriever}: checkpoint step ${p.step} of run ${p.runId} (${p.model}, ${p.backend}, adapter ${p.adapterSha256.slice(0, 12)})${toy}`;
  });
}

/** How a dense retriever bounded for a CPU run was run, so its row is not read as the papers' baseline. */
function boundedDenseLines(retrievers: NonNullable<FinalScreenContext['retrievers']>): string[] {
  const lines: string[] = [];
  for (const r of retrievers) {
    if (r.kind !== 'dense' || (r.bm25Candidates === undefined && r.maxChunksPerFile === undefined)) continue;
    const corpus =
      r.bm25Candidates === undefined
        ? 'every file of the repository'
        : `each instance's BM25 top-${r.bm25Candidates} files (the BM25 prefilter, not the papers' whole-repository dense baseline)`;
    const chunks =
      r.maxChunksPerFile === undefined ? 'whole files' : `their first ${r.maxChunksPerFile} chunk${r.maxChunksPerFile > 1 ? 's' : ''}`;
    lines.push(
      `  ${r.name}: ${r.modelDir ? `${r.modelDir.split('/').filter(Boolean).pop()} ` : ''}embeddings of ${corpus}, ${chunks} (a bounded corpus for a CPU run)`,
    );
  }
  return lines;
}

/** What needs an endpoint and was not run (the LLM judge, downstream injection), with the config lines that turn it on. */
function notRunLines(context: FinalScreenContext): string[] {
  const missing: string[] = [];
  if (context.judgeMode === 'none') missing.push('the LLM judge');
  if (!context.stages.includes('downstream')) missing.push('downstream injection');
  if (missing.length === 0) return [];
  return [
    '',
    `  Not run here: ${missing.join(' and ')} need an OpenAI-compatible endpoint. Turn them on in the config:`,
    ...(context.judgeMode === 'none' ? ['    judge: { mode: llm, baseUrl: http://localhost:8000/v1, model: Qwen/Qwen3-32B }'] : []),
    ...(!context.stages.includes('downstream')
      ? [
          `    stages: [${[...context.stages, 'downstream'].join(', ')}]`,
          '    downstream: { configurations: [{ name: none, source: none }, { name: bm25, source: predictions, k: 2 }], baseline: none,',
          '                  agent: { kind: builtin, baseUrl: http://localhost:8000/v1, model: Qwen/Qwen3-32B },',
          '                  harness: { kind: swebench, … } }   # or local, with FAIL_TO_PASS / PASS_TO_PASS instances (README, Downstream)',
        ]
      : []),
  ];
}
