import { decimal1, percent1 } from '../../reports/format';
import type { DownstreamPlan } from '../../../schemas/downstream/plan';
import type { DownstreamRunRow } from '../../../schemas/downstream/runs';
import type { DownstreamTable, Interval, PairedEfficiency } from '../../../schemas/downstream/table';
import { formatDownstreamTable, formatTokens } from './metrics';

/**
 * The downstream stage's report (CodeGrep Table 3 and §5.3's paired reading) as a list of blocks, which
 * report-render.ts turns into Markdown and into a self-contained HTML section, so both always say the same thing.
 */
export type ReportBlock =
  | { kind: 'heading'; text: string }
  | { kind: 'paragraph'; text: string }
  | { kind: 'list'; items: string[] }
  | { kind: 'table'; header: string[]; rows: string[][] };

export interface DownstreamReportInput {
  plan: DownstreamPlan;
  table: DownstreamTable;
  rows: readonly DownstreamRunRow[];
  bootstrap: { resamples: number; seed: number; confidence: number };
  generatedAt: string;
}

const OUTCOMES = ['resolved', 'unresolved', 'patch_failed', 'timeout', 'error'] as const;
const MAX_ERRORS_LISTED = 30;

const signedPercent = (v: number | null) => (v === null ? '–' : `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`);
const ci = (interval: Interval | null, format: (v: number) => string) =>
  interval ? ` [${format(interval.low)}, ${format(interval.high)}]` : '';

/** Counts of `key(row)` per configuration, in plan order. */
export function countBy(rows: readonly DownstreamRunRow[], key: (row: DownstreamRunRow) => string): Record<string, Record<string, number>> {
  const counts: Record<string, Record<string, number>> = {};
  for (const row of rows) {
    const perConfiguration = (counts[row.configuration] ??= {});
    const value = key(row);
    perConfiguration[value] = (perConfiguration[value] ?? 0) + 1;
  }
  return counts;
}

/** Table 3's cells for one row, taken from lib/downstream's own formatter so Markdown and HTML agree with it. */
function table3Cells(table: DownstreamTable): { header: string[]; rows: string[][] } {
  const split = (line: string) => line.replace(/^\| /, '').replace(/ \|$/, '').split(' | ');
  const header = split(formatDownstreamTable({ baseline: table.baseline, rows: [] }).split('\n')[0]!);
  const rows = table.rows.map((row) => {
    const line = formatDownstreamTable({ baseline: table.baseline, rows: [row] }).split('\n')[2]!;
    // The configuration name is free text (it may hold " | "): take it from the row, the rest from the line.
    const rest = line.slice(`| ${row.configuration} | `.length).replace(/ \|$/, '');
    return [row.configuration, ...rest.split(' | ')];
  });
  return { header, rows };
}

function pairedSentence(name: string, baseline: string, n: number, rounds: PairedEfficiency, tokens: PairedEfficiency): string {
  if (n === 0) return `${name} vs ${baseline}: no instance is resolved by both, so there is no paired efficiency.`;
  const change = (p: PairedEfficiency, format: (v: number) => string) =>
    p.baseline === null || p.value === null
      ? '–'
      : `${format(p.baseline)} → ${format(p.value)} (${signedPercent(p.relativeChange)}${p.differenceInterval ? `; mean difference${ci(p.differenceInterval, format)}` : ''})`;
  return `${name} vs ${baseline}: on the ${n} instance(s) both resolve, rounds ${change(rounds, (v) => v.toFixed(1))} and tokens ${change(tokens, formatTokens)}.`;
}

export function downstreamReportBlocks(input: DownstreamReportInput): ReportBlock[] {
  const { plan, table, rows, bootstrap } = input;
  return [
    runSummary(plan, input.generatedAt),
    ...table3Blocks(table, bootstrap),
    ...intervalBlocks(table),
    ...pairedBlocks(table),
    ...outcomeBlocks(table, rows),
    ...injectionBlocks(plan),
    ...perInstanceBlocks(plan, rows),
    ...errorBlocks(plan, rows),
  ];
}

function runSummary(plan: DownstreamPlan, generatedAt: string): ReportBlock {
  const instances = plan.instances.length;
  return {
    kind: 'paragraph',
    text:
      `Run ${plan.runId}: ${plan.configurations.length} configuration(s) × ${instances} instance(s) = ${plan.pairs.length} runs. ` +
      `Agent: ${plan.agent}. Harness: ${plan.harness}. Instances: ${plan.instancesFile}` +
      (plan.invalidInstances.length > 0 ? ` (${plan.invalidInstances.length} unreadable row(s) skipped)` : '') +
      `. Generated ${generatedAt}.`,
  };
}

function table3Blocks(table: DownstreamTable, bootstrap: DownstreamReportInput['bootstrap']): ReportBlock[] {
  return [
    { kind: 'heading', text: 'Resolve rate and efficiency (CodeGrep Table 3)' },
    { kind: 'table', ...table3Cells(table) },
    {
      kind: 'paragraph',
      text:
        `Resolved r. / Resolved tok. / Unresolved r.: mean rounds and input + output tokens over each configuration's own resolved / unresolved runs (pooled, §4.3); ` +
        `runs that failed before the harness could judge them (error) count as not resolved and are left out of the means. ` +
        `Δ resolve: resolve-rate difference against ${table.baseline} on the instances both ran; McNemar: exact two-sided test on the discordant instances (b = ${table.baseline} only, c = the configuration only). ` +
        `Paired columns: the instances both resolve (§5.3). Intervals: percentile bootstrap, ${bootstrap.resamples} resamples, ${Math.round(bootstrap.confidence * 100)}%, seed ${bootstrap.seed}.`,
    },
  ];
}

function intervalBlocks(table: DownstreamTable): ReportBlock[] {
  return [
    { kind: 'heading', text: 'Intervals' },
    {
      kind: 'table',
      header: ['Config', 'Resolved / runs', 'Resolve [CI]', 'Resolved r. [CI]', 'Resolved tok. [CI]', 'Unresolved r. [CI]'],
      rows: table.rows.map((row) => [
        row.configuration,
        `${row.resolved} / ${row.instances}`,
        `${percent1(row.resolveRate)}${ci(row.resolveRateInterval, (v) => percent1(v))}`,
        `${decimal1(row.resolvedRounds.mean)}${ci(row.resolvedRounds.interval, (v) => v.toFixed(1))} (n ${row.resolvedRounds.n})`,
        `${formatTokens(row.resolvedTokens.mean)}${ci(row.resolvedTokens.interval, formatTokens)} (n ${row.resolvedTokens.n})`,
        `${decimal1(row.unresolvedRounds.mean)}${ci(row.unresolvedRounds.interval, (v) => v.toFixed(1))} (n ${row.unresolvedRounds.n})`,
      ]),
    },
  ];
}

/** One sentence per configuration compared with the baseline; none without a comparison. */
function pairedBlocks(table: DownstreamTable): ReportBlock[] {
  const compared = table.rows.filter((row) => row.vsBaseline !== null);
  if (compared.length === 0) return [];
  return [
    { kind: 'heading', text: 'Pooled vs paired efficiency (§5.3)' },
    {
      kind: 'list',
      items: compared.map((row) =>
        pairedSentence(
          row.configuration,
          table.baseline,
          row.vsBaseline!.bothResolved,
          row.vsBaseline!.pairedRounds,
          row.vsBaseline!.pairedTokens,
        ),
      ),
    },
  ];
}

function outcomeBlocks(table: DownstreamTable, rows: readonly DownstreamRunRow[]): ReportBlock[] {
  const outcomes = countBy(rows, (r) => r.outcome);
  const endReasons = countBy(rows, (r) => r.endReason);
  const reasons = [...new Set(rows.map((r) => r.endReason))].sort();
  return [
    { kind: 'heading', text: 'Outcomes and why the agent stopped' },
    {
      kind: 'table',
      header: ['Config', ...OUTCOMES, ...reasons.map((r) => `ended: ${r}`)],
      rows: table.rows.map((row) => [
        row.configuration,
        ...OUTCOMES.map((o) => String(outcomes[row.configuration]?.[o] ?? 0)),
        ...reasons.map((r) => String(endReasons[row.configuration]?.[r] ?? 0)),
      ]),
    },
  ];
}

/** What each injecting configuration put into the issue, and from where; none when no configuration injects. */
function injectionBlocks(plan: DownstreamPlan): ReportBlock[] {
  const injected = plan.configurations.filter((c) => c.source !== 'none');
  if (injected.length === 0) return [];
  return [
    { kind: 'heading', text: 'Injection' },
    { kind: 'list', items: injected.map(injectionSentence) },
  ];
}

function injectionSentence(c: DownstreamPlan['configurations'][number]): string {
  const k = c.k ? `, first ${c.k} file(s)` : '';
  if (c.source === 'oracle') return `${c.name}: the gold patch's files${k} (oracle).`;
  const policy = c.predictionsFrom?.policy;
  const checkpoint = policy
    ? `, the trained policy ${policy.model} (base model ${policy.baseModel}, step ${policy.step}, adapter sha256 ${policy.adapterSha256})`
    : '';
  const from = c.predictionsFrom
    ? `${c.predictionsFrom.uri} (${c.predictionsFrom.format}${c.predictionsFrom.retriever ? `, retriever ${c.predictionsFrom.retriever}` : ''}${checkpoint})`
    : 'no source';
  const missing =
    c.missingPredictions.length > 0
      ? `; no prediction for ${c.missingPredictions.length} instance(s) (${c.missingPredictions.slice(0, 5).join(', ')}${c.missingPredictions.length > 5 ? ', …' : ''}), run with the issue unchanged`
      : '';
  const errors =
    c.predictionErrors.length > 0 ? `; ${c.predictionErrors.length} unusable prediction row(s), first: ${c.predictionErrors[0]}` : '';
  const what = c.source === 'agent' ? 'files found by the served policy, from' : 'predictions from';
  return `${c.name}: ${what} ${from}${k}${missing}${errors}.`;
}

function perInstanceBlocks(plan: DownstreamPlan, rows: readonly DownstreamRunRow[]): ReportBlock[] {
  const byPair = new Map(rows.map((r) => [`${r.configuration}\u0000${r.instanceId}`, r]));
  const names = plan.configurations.map((c) => c.name);
  return [
    { kind: 'heading', text: 'Per instance' },
    {
      kind: 'table',
      header: ['Instance', ...names],
      rows: plan.instances.map((instance) => [
        instance.instance_id,
        ...names.map((name) => {
          const row = byPair.get(`${name}\u0000${instance.instance_id}`);
          if (!row) return '–';
          const mark = row.resolved ? 'resolved' : row.outcome;
          return `${mark}, ${row.rounds} r., ${formatTokens(row.inputTokens + row.outputTokens)} tok.`;
        }),
      ]),
    },
  ];
}

/** The runs that failed and the instance rows that could not be read, each list cut at MAX_ERRORS_LISTED. */
function errorBlocks(plan: DownstreamPlan, rows: readonly DownstreamRunRow[]): ReportBlock[] {
  const blocks: ReportBlock[] = [];
  const failed = rows.filter((r) => r.error !== null);
  if (failed.length > 0) {
    blocks.push({ kind: 'heading', text: 'Errors' });
    blocks.push({
      kind: 'list',
      items: [
        ...failed
          .slice(0, MAX_ERRORS_LISTED)
          .map((r) => `${r.configuration} / ${r.instanceId} (${r.outcome}, ${r.endReason}): ${r.error!.split('\n')[0]!.slice(0, 300)}`),
        ...(failed.length > MAX_ERRORS_LISTED ? [`… and ${failed.length - MAX_ERRORS_LISTED} more (see runs.parquet)`] : []),
      ],
    });
  }
  if (plan.invalidInstances.length > 0) {
    blocks.push({ kind: 'heading', text: 'Unreadable instance rows' });
    blocks.push({ kind: 'list', items: plan.invalidInstances.slice(0, MAX_ERRORS_LISTED) });
  }
  return blocks;
}
