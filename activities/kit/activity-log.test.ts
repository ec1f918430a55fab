import { Context, log as contextLog } from '@temporalio/activity';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { captureActivityLog } from './activity-log';

describe('captureActivityLog', () => {
  it('logs from a callback outside the activity context and after the activity ended, with its identity', async () => {
    const late: { message: string; meta?: Record<string, unknown> }[] = [];
    const workerLogger = {
      info: () => undefined,
      warn: (message: string, meta?: Record<string, unknown>) => late.push({ message, meta }),
      error: () => undefined,
    };
    const live: string[] = [];
    const contextLogger = new DefaultLogger('INFO', (entry) => live.push(entry.message));
    const env = new MockActivityEnvironment({ activityId: 'seg-1', activityType: 'trainSegment', attempt: 2 }, { logger: contextLogger });
    let captured: ReturnType<typeof captureActivityLog> | undefined;
    await env.run(async () => {
      captured = captureActivityLog(Context.current(), workerLogger);
      captured.warn('while live');
      captured.end();
    });
    // A timer that does not carry the activity's async context, as one started by the SDK's cancellation.
    const fromTimer = await new Promise<{ proxy: unknown }>((resolve) =>
      setImmediate(() => {
        let proxy: unknown = null;
        try {
          contextLog.warn('through the context');
        } catch (error) {
          proxy = error;
        }
        captured!.warn('after the end', { step: 3 });
        resolve({ proxy });
      }),
    );
    expect(String(fromTimer.proxy)).toContain('Activity context not initialized');
    expect(captured!.ended).toBe(true);
    expect(late).toEqual([
      {
        message: 'after the end',
        meta: expect.objectContaining({ step: 3, activityType: 'trainSegment', activityId: 'seg-1', attempt: 2, afterActivityEnd: true }),
      },
    ]);
    expect(live).toEqual(['while live']);
  });
});
