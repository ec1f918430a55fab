import cliProgress from 'cli-progress';
import type { WorkflowProgress } from '../schemas/progress';

/**
 * Draws one bar per stage from `progress` query answers. On a terminal: live bars; elsewhere (CI, pipes):
 * a plain line whenever a stage's numbers change, at most every few seconds.
 */
export class ProgressView {
  private readonly interactive = Boolean(process.stdout.isTTY);
  private readonly multibar = this.interactive
    ? new cliProgress.MultiBar(
        { format: ' {stage} |{bar}| {value}/{total} {unit} {status}', hideCursor: true, clearOnComplete: false, barsize: 30 },
        cliProgress.Presets.shades_classic,
      )
    : null;
  private readonly bars = new Map<string, cliProgress.SingleBar>();
  private readonly lastLine = new Map<string, { text: string; at: number }>();

  update(progress: WorkflowProgress, prefix = ''): void {
    for (const [name, stage] of Object.entries(progress.stages)) {
      const key = `${prefix}${name}`;
      const p = stage.progress;
      const done = p?.done ?? (stage.status === 'completed' || stage.status === 'cached' ? 1 : 0);
      const total = p?.total ?? (p ? Math.max(p.done, 1) : 1);
      const counts =
        p && Object.keys(p.counts).length > 0
          ? Object.entries(p.counts)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')
          : '';
      const status = `${stage.status}${stage.note ? ` (${stage.note})` : ''} ${counts}`.trim();
      const payload = { stage: key.padEnd(16), unit: p?.unit ?? '', status };
      if (this.multibar) {
        let bar = this.bars.get(key);
        if (!bar) {
          bar = this.multibar.create(total, done, payload);
          this.bars.set(key, bar);
        }
        bar.setTotal(total);
        bar.update(done, payload);
      } else {
        const text = `${key}: ${status}${p ? ` ${p.done}${p.total !== null ? `/${p.total}` : ''} ${p.unit}` : ''}`;
        const previous = this.lastLine.get(key);
        const now = Date.now();
        if (!previous || (previous.text !== text && now - previous.at > 3_000) || (previous.text !== text && stage.status !== 'running')) {
          console.log(`  ${text}`);
          this.lastLine.set(key, { text, at: now });
        }
      }
    }
  }

  stop(): void {
    this.multibar?.stop();
  }
}
