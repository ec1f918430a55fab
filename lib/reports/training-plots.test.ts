import { describe, expect, it } from 'vitest';
import { formatTick, linePlotSvg, niceTicks, smooth, trainingPlots, TRAINING_PLOT_SPECS, validationPlot } from './training-plots';

function polyline(svg: string, cls: string): [number, number][] {
  const match = new RegExp(`<polyline class="${cls}"[^>]* points="([^"]*)"`).exec(svg);
  if (!match) return [];
  return match[1]!.split(' ').map((pair) => pair.split(',').map(Number) as [number, number]);
}

describe('niceTicks', () => {
  it('covers the range with round steps', () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(1, 897)).toEqual([0, 200, 400, 600, 800, 1000]);
    expect(niceTicks(0.013, 0.31)).toEqual([0, 0.1, 0.2, 0.3, 0.4]);
    expect(niceTicks(2.1, 3.8)).toEqual([2, 2.5, 3, 3.5, 4]);
  });

  it('widens a constant series into a visible range', () => {
    expect(niceTicks(0, 0)).toEqual([-1, -0.5, 0, 0.5, 1]);
    const around = niceTicks(4, 4);
    expect(around[0]).toBeLessThan(4);
    expect(around[around.length - 1]).toBeGreaterThan(4);
  });

  it('refuses non-finite bounds', () => {
    expect(() => niceTicks(0, Number.NaN)).toThrow('niceTicks: min and max must be finite');
  });
});

describe('formatTick and smooth', () => {
  it('keeps labels short', () => {
    expect([formatTick(0), formatTick(0.25), formatTick(1500), formatTick(25_000), formatTick(2e6), formatTick(5e-6)]).toEqual([
      '0',
      '0.25',
      '1500',
      '25k',
      '2M',
      '5.0e−6',
    ]);
  });

  it('debiases the moving average so it starts at the first value', () => {
    expect(smooth([2, 2, 2], 0.9).map((v) => Number(v.toFixed(12)))).toEqual([2, 2, 2]);
    const [first, second] = smooth([0, 1], 0.5);
    expect(first).toBe(0);
    expect(second).toBeCloseTo(2 / 3, 12);
    expect(() => smooth([1], 1)).toThrow('smoothing weight must be in [0, 1)');
  });
});

describe('linePlotSvg', () => {
  it('draws every finite point, in step order, inside the plot frame, with markers for short series', () => {
    const svg = linePlotSvg({
      title: 'Reward <v3> & co',
      xLabel: 'training step',
      yLabel: 'reward',
      points: [
        { x: 3, y: 0.5 },
        { x: 1, y: 0.1 },
        { x: 2, y: Number.NaN },
        { x: 4, y: 0.9 },
      ],
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    expect(svg).toContain('<title>Reward &lt;v3&gt; &amp; co</title>');
    expect(svg).not.toContain('<v3>');
    const raw = polyline(svg, 'raw');
    expect(raw).toHaveLength(3);
    expect(raw.map(([x]) => x)).toEqual([...raw.map(([x]) => x)].sort((a, b) => a - b));
    for (const [x, y] of raw) {
      expect(x).toBeGreaterThanOrEqual(64);
      expect(x).toBeLessThanOrEqual(560 - 18);
      expect(y).toBeGreaterThanOrEqual(34);
      expect(y).toBeLessThanOrEqual(300 - 44);
    }
    // Higher reward is drawn higher up (smaller y).
    expect(raw[2]![1]).toBeLessThan(raw[0]![1]);
    expect(svg.match(/<circle /g)).toHaveLength(3);
    expect(polyline(svg, 'smoothed')).toEqual([]);
  });

  it('adds a smoothed line over long series and drops markers', () => {
    const points = Array.from({ length: 100 }, (_, i) => ({ x: i + 1, y: (i % 2) * 0.5 + i / 100 }));
    const svg = linePlotSvg({ title: 't', xLabel: 'x', yLabel: 'y', points, smoothing: 0.8 });
    expect(polyline(svg, 'raw')).toHaveLength(100);
    const smoothed = polyline(svg, 'smoothed');
    expect(smoothed).toHaveLength(100);
    const spread = (line: [number, number][]) => Math.max(...line.map(([, y]) => y)) - Math.min(...line.map(([, y]) => y));
    expect(spread(smoothed)).toBeLessThan(spread(polyline(svg, 'raw')));
    expect(svg).not.toContain('<circle ');
  });

  it('says so when there is nothing to draw', () => {
    const svg = linePlotSvg({ title: 'KL', xLabel: 'x', yLabel: 'y', points: [{ x: 1, y: Number.POSITIVE_INFINITY }] });
    expect(svg).toContain('>no data</text>');
    expect(svg).not.toContain('<polyline');
  });
});

describe('trainingPlots', () => {
  it('makes the Fig. 2 and Fig. 4 panels from metrics rows', () => {
    const rows = [1, 2, 3].map((step) => ({
      step,
      rewardMean: step / 10,
      kl: 0.01 * step,
      turnsMean: 4 - step / 2,
      completionLenMean: 100 * step,
      gradNorm: 1,
      truncatedRatio: 0,
    }));
    const plots = trainingPlots(rows);
    expect(plots.map((p) => [p.name, p.points])).toEqual(TRAINING_PLOT_SPECS.map((s) => [s.name, 3]));
    expect(plots.map((p) => p.name)).toEqual(['reward', 'kl', 'turns', 'completion-length', 'grad-norm', 'clipping-ratio']);
    expect(plots[0]!.svg).toContain('<title>Reward</title>');
    expect(polyline(plots[3]!.svg, 'raw')).toHaveLength(3);
  });
});

describe('validationPlot', () => {
  it('draws the held-out metric of each validated checkpoint over steps, and is null when nothing was validated', () => {
    const plot = validationPlot([
      { step: 40, metric: 'fBetaMean', value: 0.604 },
      { step: 80, metric: 'fBetaMean', value: 0.708 },
      { step: 120, metric: 'fBetaMean', value: null },
    ]);
    expect(plot).not.toBeNull();
    expect(plot!.name).toBe('validation');
    expect(plot!.points).toBe(2);
    expect(plot!.svg).toContain('<svg');
    expect(plot!.svg).toContain('fBetaMean');
    expect(validationPlot([])).toBeNull();
    expect(validationPlot([{ step: 3, metric: 'fBetaMean', value: null }])).toBeNull();
  });
});
