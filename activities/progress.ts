import { Context } from '@temporalio/activity';
import type { Client } from '@temporalio/client';
import type { StageProgress } from '../schemas/progress';

/**
 * Reports an activity's progress: a heartbeat on every call (cheap, local, carries resume details) and a
 * `stageProgress` signal to the displaying workflows at most every `signalEveryMs` (signals land in
 * history, so they are throttled), plus one final signal on `flush()`.
 */
export class ProgressReporter {
  private lastSignalAt = 0;
  private latest: StageProgress | null = null;

  constructor(
    private readonly client: Client | null,
    private readonly targets: readonly string[],
    private readonly signalEveryMs = 2_000,
  ) {}

  report(progress: StageProgress, heartbeatDetails?: unknown): void {
    this.latest = progress;
    Context.current().heartbeat(heartbeatDetails ?? progress);
    const now = Date.now();
    if (now - this.lastSignalAt >= this.signalEveryMs) {
      this.lastSignalAt = now;
      void this.send(progress);
    }
  }

  async flush(): Promise<void> {
    if (this.latest) await this.send(this.latest);
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
