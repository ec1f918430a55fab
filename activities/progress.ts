import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { StageProgress } from '../schemas/progress';

/**
 * Reports an activity's progress: a heartbeat on every call (cheap, local, carries resume details), a
 * keep-alive heartbeat on a timer so slow items (a judge call may take 60 s and retries) never trip the
 * heartbeat timeout, and a `stageProgress` signal to the displaying workflows at most every `signalEveryMs`
 * (signals land in history, so they are throttled), plus a final one on `flush()`.
 */
export class ProgressReporter {
  private lastSignalAt = 0;
  private latest: StageProgress | null = null;
  private readonly keepAlive: NodeJS.Timeout;

  constructor(
    private readonly client: Client | null,
    private readonly targets: readonly string[],
    private readonly signalEveryMs = 2_000,
  ) {
    const context = Context.current();
    const heartbeatTimeoutMs = context.info.heartbeatTimeoutMs ?? 30_000;
    this.keepAlive = setInterval(() => context.heartbeat(this.latest ?? undefined), Math.max(200, heartbeatTimeoutMs / 3));
    this.keepAlive.unref();
  }

  report(progress: StageProgress): void {
    this.latest = progress;
    Context.current().heartbeat(progress);
    const now = Date.now();
    if (now - this.lastSignalAt >= this.signalEveryMs) {
      this.lastSignalAt = now;
      void this.send(progress);
    }
  }

  /** Sends the latest progress and stops the keep-alive timer. */
  async flush(): Promise<void> {
    clearInterval(this.keepAlive);
    if (this.latest) await this.send(this.latest);
  }

  /** Stops the keep-alive timer without sending (on failure paths). */
  close(): void {
    clearInterval(this.keepAlive);
  }

  private async send(progress: StageProgress): Promise<void> {
    if (!this.client) return;
    await Promise.all(
      this.targets.map((workflowId) =>
        this.client!.workflow
          .getHandle(workflowId)
          .signal('stageProgress', progress)
          // Progress is best effort: a finished or unknown target must never fail the stage.
          .catch(() => undefined),
      ),
    );
  }
}
