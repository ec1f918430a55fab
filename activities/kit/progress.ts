import { Context } from '@temporalio/activity';
import type { StageProgress } from '../../schemas/progress';

/**
 * Reports an activity's progress as heartbeat details: a heartbeat on every call (cheap: the SDK throttles
 * them, and heartbeats never enter a workflow's history), plus a keep-alive heartbeat on a timer so slow items
 * (a judge call may take 60 s and retries) never trip the heartbeat timeout. The CLI (`cli/live-progress.ts`)
 * and the Web UI's "Pending Activities" panel read the latest details from the workflow's description.
 *
 * No signals: a signal costs its workflow about 4 history events, so throttled progress signals make a
 * history grow with the length of the run (README "History bounds"). Workflows count finished activities themselves.
 */
export class ProgressReporter {
  private latest: StageProgress | null = null;
  private readonly keepAlive: NodeJS.Timeout;

  constructor() {
    const context = Context.current();
    const heartbeatTimeoutMs = context.info.heartbeatTimeoutMs ?? 30_000;
    this.keepAlive = setInterval(() => context.heartbeat(this.latest ?? undefined), Math.max(200, heartbeatTimeoutMs / 3));
    this.keepAlive.unref();
  }

  report(progress: StageProgress): void {
    this.latest = progress;
    Context.current().heartbeat(progress);
  }

  /** Heartbeats the latest progress once more and stops the keep-alive timer. */
  async flush(): Promise<void> {
    clearInterval(this.keepAlive);
    if (this.latest) Context.current().heartbeat(this.latest);
  }

  /** Stops the keep-alive timer (on failure paths too). */
  close(): void {
    clearInterval(this.keepAlive);
  }
}
