import { describe, expect, it } from 'vitest';
import { DownstreamTableSchema, type DownstreamRunRow } from '../../../schemas/downstream';
import { downstreamTable, formatDownstreamTable, formatTokens } from './metrics';

/**
 * A 12-instance study worked out by hand.
 *
 *   instance      1     2     3     4     5  6  7  8  9  10   11    12
 *   baseline      R10   R20   R30   R40   ·  ·  ·  ·  ·  ·   ·     ·      (unresolved: 100 rounds, #12: 60)
 *   codegrep      R8    R16   R24   ·100  R10 R10 R10 R10 R10 R10  ·100  error (0 rounds)
 *
 * baseline: 4/12 resolved; resolved rounds (10+20+30+40)/4 = 25; resolved tokens (1100+2200+3300+4400)/4 = 2750;
 *           unresolved rounds (7·100 + 60)/8 = 95.
 * codegrep: 9/12 resolved; resolved rounds (8+16+24+6·10)/9 = 12; resolved tokens (1000+2000+3000+6·500)/9 = 1000;
 *           unresolved rounds over #4 and #11 only (the error row is left out) = 100; errors 1.
 * McNemar: b = {4} = 1, c = {5..10} = 6 → p = 2·(1 + 7)/2^7 = 0.125. Δ resolve = (6 − 1)/12.
 * Paired set (both resolve) = {1, 2, 3}: rounds 20 → 16 (−20%), tokens 2200 → 2000 (−1/11).
 */
function row(
  configuration: string,
  i: number,
  resolved: boolean,
  rounds: number,
  input: number,
  output: number,
  outcome?: DownstreamRunRow['outcome'],
): DownstreamRunRow {
  return {
    configuration,
    instanceId: `inst-${String(i).padStart(2, '0')}`,
    resolved,
    outcome: outcome ?? (resolved ? 'resolved' : 'unresolved'),
    rounds,
    inputTokens: input,
    outputTokens: output,
    patchBytes: 100,
    endReason: 'submitted',
    error: outcome === 'error' ? 'agent: endpoint down' : null,
    servedModel: null,
    baseModel: null,
    checkpointStep: null,
    adapterSha256: null,
  };
}

const baseline: DownstreamRunRow[] = [
  row('baseline', 1, true, 10, 1000, 100),
  row('baseline', 2, true, 20, 2000, 200),
  row('baseline', 3, true, 30, 3000, 300),
  row('baseline', 4, true, 40, 4000, 400),
  ...[5, 6, 7, 8, 9, 10, 11].map((i) => row('baseline', i, false, 100, 9000, 900)),
  row('baseline', 12, false, 60, 9000, 900),
];
const codegrep: DownstreamRunRow[] = [
  row('codegrep', 1, true, 8, 900, 100),
  row('codegrep', 2, true, 16, 1800, 200),
  row('codegrep', 3, true, 24, 2700, 300),
  row('codegrep', 4, false, 100, 9000, 900),
  ...[5, 6, 7, 8, 9, 10].map((i) => row('codegrep', i, true, 10, 500, 0)),
  row('codegrep', 11, false, 100, 9000, 900),
  row('codegrep', 12, false, 0, 0, 0, 'error'),
];

describe('downstream Table 3', () => {
  const table = downstreamTable([...codegrep, ...baseline], { baseline: 'baseline', bootstrap: { seed: 11, resamples: 500 } });
  const [base, cg] = table.rows;

  it('puts the baseline first and computes pooled efficiency on each configuration’s own sets', () => {
    expect(DownstreamTableSchema.parse(table)).toEqual(table);
    expect(table.rows.map((r) => r.configuration)).toEqual(['baseline', 'codegrep']);
    expect(base).toMatchObject({ instances: 12, resolved: 4, errors: 0, vsBaseline: null });
    expect(base!.resolveRate).toBeCloseTo(4 / 12, 12);
    expect(base!.resolvedRounds).toMatchObject({ n: 4, mean: 25 });
    expect(base!.resolvedTokens).toMatchObject({ n: 4, mean: 2750 });
    expect(base!.unresolvedRounds).toMatchObject({ n: 8, mean: 95 });

    expect(cg).toMatchObject({ instances: 12, resolved: 9, errors: 1 });
    expect(cg!.resolveRate).toBeCloseTo(9 / 12, 12);
    expect(cg!.resolvedRounds).toMatchObject({ n: 9, mean: 12 });
    expect(cg!.resolvedTokens).toMatchObject({ n: 9, mean: 1000 });
    expect(cg!.unresolvedRounds).toMatchObject({ n: 2, mean: 100 });
  });

  it('compares with the baseline on the paired set, with McNemar on the discordant instances', () => {
    const vs = cg!.vsBaseline!;
    expect(vs).toMatchObject({ baseline: 'baseline', common: 12, bothResolved: 3, mcnemar: { b: 1, c: 6, pValue: 0.125 } });
    expect(vs.resolveRateDifference).toBeCloseTo(5 / 12, 12);
    expect(vs.pairedRounds).toMatchObject({ n: 3, baseline: 20, value: 16 });
    expect(vs.pairedRounds.relativeChange).toBeCloseTo(-0.2, 12);
    expect(vs.pairedTokens).toMatchObject({ n: 3, baseline: 2200, value: 2000 });
    expect(vs.pairedTokens.relativeChange).toBeCloseTo(-1 / 11, 12);
    // Per-instance round differences on the paired set are −2, −4, −6: the interval stays inside them.
    expect(vs.pairedRounds.differenceInterval!.low).toBeGreaterThanOrEqual(-6);
    expect(vs.pairedRounds.differenceInterval!.high).toBeLessThanOrEqual(-2);
  });

  it('gives seeded, reproducible intervals that contain the estimates', () => {
    const again = downstreamTable([...baseline, ...codegrep], { baseline: 'baseline', bootstrap: { seed: 11, resamples: 500 } });
    expect(again).toEqual(table);
    const interval = cg!.resolveRateInterval!;
    expect(interval).toMatchObject({ confidence: 0.95, resamples: 500, seed: 11 });
    expect(interval.low).toBeLessThanOrEqual(0.75);
    expect(interval.high).toBeGreaterThanOrEqual(0.75);
    expect(interval.high).toBeLessThanOrEqual(1);
    const delta = cg!.vsBaseline!.resolveRateDifferenceInterval!;
    expect(delta.low).toBeLessThanOrEqual(5 / 12);
    expect(delta.high).toBeGreaterThanOrEqual(5 / 12);
    const other = downstreamTable([...baseline, ...codegrep], { baseline: 'baseline', bootstrap: { seed: 12, resamples: 500 } });
    expect(other.rows[1]!.resolveRateInterval).not.toEqual(interval);
  });

  it('uses only instances both configurations ran for paired statistics', () => {
    const partial = codegrep.filter((r) => r.instanceId !== 'inst-04' && r.instanceId !== 'inst-05');
    const vs = downstreamTable([...baseline, ...partial], { baseline: 'baseline' }).rows[1]!.vsBaseline!;
    expect(vs).toMatchObject({ common: 10, bothResolved: 3, mcnemar: { b: 0, c: 5, pValue: 0.0625 } });
    expect(vs.resolveRateDifference).toBeCloseTo(5 / 10, 12);
  });

  it('handles a configuration that resolves nothing, and refuses duplicates and a missing baseline', () => {
    const none = [1, 2].map((i) => row('broken', i, false, 3, 10, 1));
    const t = downstreamTable([...baseline, ...none], { baseline: 'baseline', order: ['broken'] });
    expect(t.rows[1]).toMatchObject({ resolved: 0, resolveRate: 0, resolvedRounds: { n: 0, mean: null, interval: null } });
    expect(t.rows[1]!.vsBaseline).toMatchObject({
      common: 2,
      bothResolved: 0,
      pairedRounds: { n: 0, baseline: null, value: null, relativeChange: null },
    });
    expect(() => downstreamTable([...baseline, baseline[0]!], { baseline: 'baseline' })).toThrow(
      /"baseline" has instance "inst-01" twice \(row 13\)/,
    );
    expect(() => downstreamTable(codegrep, { baseline: 'baseline' })).toThrow(
      /no rows for the baseline configuration "baseline" \(configurations: codegrep\)/,
    );
  });

  it('renders Table 3’s columns', () => {
    const text = formatDownstreamTable(table);
    const lines = text.split('\n');
    expect(lines[0]).toBe(
      '| Config | Resolve | Resolved r. | Resolved tok. | Unresolved r. | Δ resolve [95% CI] | McNemar p (b/c) | Paired n | Paired r. | Paired tok. |',
    );
    expect(lines[2]).toBe('| baseline | 33.3% | 25.0 | 2.8K | 95.0 | – | – | – | – | – |');
    expect(lines[3]).toMatch(
      /^\| codegrep \| 75\.0% \| 12\.0 \| 1\.0K \| 100\.0 \| \+41\.7pp \[[-\d.]+, [-\d.]+\] \| 0\.125 \(1\/6\) \| 3 \| 20\.0 → 16\.0 \(-20\.0%\) \| 2\.2K → 2\.0K \(-9\.1%\) \|$/,
    );
    expect([formatTokens(631_000), formatTokens(1_511_530), formatTokens(2_750), formatTokens(999), formatTokens(null)]).toEqual([
      '631K',
      '1.51M',
      '2.8K',
      '999',
      '–',
    ]);
  });
});
