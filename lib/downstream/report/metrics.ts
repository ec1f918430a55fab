import type {
  BaselineComparison,
  DownstreamRunRow,
  DownstreamTable,
  DownstreamTableRow,
  Interval,
  MeanWithInterval,
  PairedEfficiency,
} from '../../../schemas/downstream';
import { bootstrapCI, mean, type BootstrapOptions, type ConfidenceInterval } from '../../metrics/summary';
import { mcnemarExact } from '../../stats/mcnemar';
import { pairedMeans, splitPaired } from '../../stats/paired';

/**
 * CodeGrep Table 3 from run rows: per configuration the resolve rate, mean rounds and tokens (input + output)
 * on its own resolved runs and mean rounds on its unresolved runs (§4.3, "averaged over each configuration's
 * own resolved / unresolved set"); against the baseline, the same efficiency on the PAIRED set of instances
 * both resolve (§5.3), the resolve-rate difference with a paired bootstrap interval, and McNemar's exact
 * test on the discordant instances (lib/stats).
 *
 * Decisions:
 * - Every row counts in its configuration's resolve rate (an `error` row is not resolved): the denominator
 *   is the instances attempted, as the paper's 500.
 * - `error` rows are left out of the efficiency means: their rounds and tokens measure an aborted run, not
 *   the agent.
 * - Intervals are seeded percentile bootstraps (lib/metrics' bootstrapCI, 1000 resamples, 95% by default):
 *   resolve rate over the configuration's instances; efficiency means over the set they are averaged on;
 *   paired statistics over per-instance differences on the instances both configurations ran.
 * - A (configuration, instance) pair given twice is an input error, not something to average.
 */
export interface DownstreamTableOptions {
  /** The configuration every other one is compared with (Table 3's "Baseline"). */
  baseline: string;
  /** Row order; configurations not listed follow in order of first appearance. Default: baseline first. */
  order?: readonly string[];
  bootstrap?: BootstrapOptions;
}

const tokensOf = (row: DownstreamRunRow) => row.inputTokens + row.outputTokens;

function toInterval(ci: ConfidenceInterval | null): Interval | null {
  return ci === null ? null : { low: ci.low, high: ci.high, confidence: ci.confidence, resamples: ci.resamples, seed: ci.seed };
}

function meanWithInterval(values: number[], bootstrap: BootstrapOptions): MeanWithInterval {
  if (values.length === 0) return { n: 0, mean: null, interval: null };
  return { n: values.length, mean: mean(values), interval: toInterval(bootstrapCI(values, bootstrap)) };
}

function groupRows(rows: readonly DownstreamRunRow[]): Map<string, Map<string, DownstreamRunRow>> {
  const byConfiguration = new Map<string, Map<string, DownstreamRunRow>>();
  rows.forEach((row, index) => {
    let runs = byConfiguration.get(row.configuration);
    if (!runs) byConfiguration.set(row.configuration, (runs = new Map()));
    if (runs.has(row.instanceId)) {
      throw new RangeError(
        `downstream rows: configuration ${JSON.stringify(row.configuration)} has instance ${JSON.stringify(row.instanceId)} twice (row ${index + 1})`,
      );
    }
    runs.set(row.instanceId, row);
  });
  return byConfiguration;
}

function pairedEfficiency(
  ids: string[],
  baseline: Map<string, DownstreamRunRow>,
  runs: Map<string, DownstreamRunRow>,
  value: (row: DownstreamRunRow) => number,
  bootstrap: BootstrapOptions,
): PairedEfficiency {
  const pick = (source: Map<string, DownstreamRunRow>) => new Map(ids.map((id) => [id, value(source.get(id)!)]));
  const paired = pairedMeans(ids, pick(baseline), pick(runs), bootstrap);
  return {
    n: paired.n,
    baseline: paired.first,
    value: paired.second,
    relativeChange: paired.relativeChange,
    differenceInterval: toInterval(paired.differenceInterval),
  };
}

function compare(
  baselineName: string,
  baseline: Map<string, DownstreamRunRow>,
  runs: Map<string, DownstreamRunRow>,
  bootstrap: BootstrapOptions,
): BaselineComparison {
  const resolvedOf = (source: Map<string, DownstreamRunRow>) => new Map([...source].map(([id, row]) => [id, row.resolved]));
  const split = splitPaired(resolvedOf(baseline), resolvedOf(runs));
  const differences = split.common.map((id) => Number(runs.get(id)!.resolved) - Number(baseline.get(id)!.resolved));
  const test = mcnemarExact(split.firstOnly.length, split.secondOnly.length);
  // Both resolved implies neither row is an `error` row, so the paired set needs no further filter.
  return {
    baseline: baselineName,
    common: split.common.length,
    resolveRateDifference: differences.length === 0 ? null : mean(differences),
    resolveRateDifferenceInterval: differences.length === 0 ? null : toInterval(bootstrapCI(differences, bootstrap)),
    mcnemar: { b: test.b, c: test.c, pValue: test.pValue },
    bothResolved: split.both.length,
    pairedRounds: pairedEfficiency(split.both, baseline, runs, (r) => r.rounds, bootstrap),
    pairedTokens: pairedEfficiency(split.both, baseline, runs, tokensOf, bootstrap),
  };
}

export function downstreamTable(rows: readonly DownstreamRunRow[], options: DownstreamTableOptions): DownstreamTable {
  const bootstrap = options.bootstrap ?? {};
  const grouped = groupRows(rows);
  const baseline = grouped.get(options.baseline);
  if (!baseline) {
    throw new RangeError(
      `downstream table: no rows for the baseline configuration ${JSON.stringify(options.baseline)} (configurations: ${[...grouped.keys()].join(', ') || 'none'})`,
    );
  }
  const order = [...new Set([options.baseline, ...(options.order ?? []), ...grouped.keys()])].filter((name) => grouped.has(name));

  const tableRows: DownstreamTableRow[] = order.map((name) => {
    const runs = grouped.get(name)!;
    const all = [...runs.values()];
    const judged = all.filter((r) => r.outcome !== 'error');
    const resolvedRuns = judged.filter((r) => r.resolved);
    const unresolvedRuns = judged.filter((r) => !r.resolved);
    const indicator = all.map((r) => Number(r.resolved));
    return {
      configuration: name,
      instances: all.length,
      resolved: all.filter((r) => r.resolved).length,
      errors: all.length - judged.length,
      resolveRate: all.length === 0 ? null : mean(indicator),
      resolveRateInterval: all.length === 0 ? null : toInterval(bootstrapCI(indicator, bootstrap)),
      resolvedRounds: meanWithInterval(
        resolvedRuns.map((r) => r.rounds),
        bootstrap,
      ),
      resolvedTokens: meanWithInterval(resolvedRuns.map(tokensOf), bootstrap),
      unresolvedRounds: meanWithInterval(
        unresolvedRuns.map((r) => r.rounds),
        bootstrap,
      ),
      vsBaseline: name === options.baseline ? null : compare(options.baseline, baseline, runs, bootstrap),
    };
  });
  return { baseline: options.baseline, rows: tableRows };
}

// ---------------------------------------------------------------------------------------------------------
// Text rendering (Table 3 layout)

const percent = (v: number | null, digits = 1) => (v === null ? '–' : `${(v * 100).toFixed(digits)}%`);
const fixed = (v: number | null, digits = 1) => (v === null ? '–' : v.toFixed(digits));
const signedPercent = (v: number | null) => (v === null ? '–' : `${v >= 0 ? '+' : ''}${(v * 100).toFixed(1)}%`);

/** 631_000 → "631K" (as the paper writes token counts), 1_510_000 → "1.51M", 2_750 → "2.8K". */
export function formatTokens(v: number | null): string {
  if (v === null) return '–';
  if (v >= 1e6) return `${(v / 1e6).toFixed(2)}M`;
  if (v >= 1e4) return `${Math.round(v / 1e3)}K`;
  if (v >= 1e3) return `${(v / 1e3).toFixed(1)}K`;
  return String(Math.round(v));
}

/** A Markdown table in Table 3's column order, plus the paired comparison columns of §5.3. */
export function formatDownstreamTable(table: DownstreamTable): string {
  const header =
    '| Config | Resolve | Resolved r. | Resolved tok. | Unresolved r. | Δ resolve [95% CI] | McNemar p (b/c) | Paired n | Paired r. | Paired tok. |';
  const rule = '|' + ' --- |'.repeat(10);
  const lines = table.rows.map((row) => {
    const vs = row.vsBaseline;
    const delta = vs?.resolveRateDifference ?? null;
    const ci = vs?.resolveRateDifferenceInterval;
    const deltaText = vs
      ? `${delta === null ? '–' : `${delta >= 0 ? '+' : ''}${(delta * 100).toFixed(1)}pp`}${ci ? ` [${(ci.low * 100).toFixed(1)}, ${(ci.high * 100).toFixed(1)}]` : ''}`
      : '–';
    const paired = (p: PairedEfficiency | undefined, fmt: (v: number | null) => string) =>
      p ? `${fmt(p.baseline)} → ${fmt(p.value)} (${signedPercent(p.relativeChange)})` : '–';
    return [
      row.configuration,
      percent(row.resolveRate),
      fixed(row.resolvedRounds.mean),
      formatTokens(row.resolvedTokens.mean),
      fixed(row.unresolvedRounds.mean),
      deltaText,
      vs ? `${vs.mcnemar.pValue.toPrecision(3)} (${vs.mcnemar.b}/${vs.mcnemar.c})` : '–',
      vs ? String(vs.bothResolved) : '–',
      paired(vs?.pairedRounds, (v) => fixed(v)),
      paired(vs?.pairedTokens, formatTokens),
    ].join(' | ');
  });
  return [header, rule, ...lines.map((l) => `| ${l} |`)].join('\n');
}
