import { Client, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { connectClient } from '../workers/connection';
import { ConfigError } from '../schemas/config';
import { TRAINING_MESSAGES, type TrainingStatus } from '../schemas/training/messages';
import { temporalConfig } from '../temporal.config';

export const TRAINING_ACTIONS = ['pause', 'resume', 'stop', 'budget', 'status'] as const;
export type TrainingAction = (typeof TRAINING_ACTIONS)[number];

const SIGNALS = { pause: TRAINING_MESSAGES.pause, resume: TRAINING_MESSAGES.resume, stop: TRAINING_MESSAGES.stopAfterCheckpoint } as const;

function describeStatus(status: TrainingStatus): string[] {
  const lines = [
    `  state       ${status.state}${status.segmentRunning ? ` (segment ${status.segment} running)` : ''}${status.smokeRun ? ' — SMOKE RUN' : ''}`,
    `  steps       ${status.step} / ${status.budget}`,
    `  checkpoint  ${status.checkpointStep === null ? 'none yet' : `step ${status.checkpointStep}${status.checkpoint ? ` (${status.checkpoint})` : ''}`}`,
    `  recipe      ${status.recipe}, ${status.algorithm}`,
  ];
  const latest = status.latest;
  if (latest) {
    lines.push(
      `  step ${latest.step}: reward ${latest.rewardMean.toFixed(4)}, KL ${latest.kl === null ? '–' : latest.kl.toFixed(4)}, turns ${latest.turnsMean.toFixed(2)}, ` +
        `c̄ ${latest.toolCallsPerTurnMean.toFixed(2)}, completion ${latest.completionLenMean.toFixed(0)} tokens, ${latest.stepTimeS.toFixed(1)} s/step`,
    );
  }
  for (const note of status.notes) lines.push(`  note: ${note}`);
  return lines;
}

/**
 * `codegrep training pause|resume|stop|budget|status <runId> [--steps N]`: steer a running training workflow
 * (`<runId>/training`). pause and stop let the running segment's trainer checkpoint first; budget changes the
 * step budget through the workflow's validated `setStepBudget` update.
 */
export async function trainingCommand(action: string, runId: string | undefined, options: { steps?: string } = {}): Promise<number> {
  if (!(TRAINING_ACTIONS as readonly string[]).includes(action)) {
    throw new ConfigError(`unknown training action "${action}" (${TRAINING_ACTIONS.join(', ')})`);
  }
  if (!runId) throw new ConfigError(`codegrep training ${action} needs a run id: codegrep training ${action} <runId>`);
  let steps: number | undefined;
  if (action === 'budget') {
    steps = Number(options.steps);
    if (options.steps === undefined || !Number.isInteger(steps) || steps < 1) {
      throw new ConfigError(
        `codegrep training budget needs --steps N with N a positive integer${options.steps === undefined ? '' : `, got ${options.steps}`}`,
      );
    }
  }
  const workflowId = runId.includes('/') ? runId : `${runId}/training`;
  const connection = await connectClient();
  try {
    const client = new Client({ connection, namespace: temporalConfig.namespace });
    const handle = client.workflow.getHandle(workflowId);
    try {
      if (action === 'status') {
        const description = await handle.describe();
        console.log(`${workflowId}: ${description.status.name}`);
        try {
          for (const line of describeStatus(await handle.query<TrainingStatus>(TRAINING_MESSAGES.trainingStatus))) console.log(line);
        } catch {
          console.log('  (no worker answered the trainingStatus query; start one with `codegrep worker`)');
        }
        return 0;
      }
      if (action === 'budget') {
        try {
          const status = await handle.executeUpdate<TrainingStatus, [number]>(TRAINING_MESSAGES.setStepBudget, { args: [steps!] });
          console.log(`codegrep: ${workflowId}: step budget set to ${status.budget}`);
          for (const line of describeStatus(status)) console.log(line);
          return 0;
        } catch (error) {
          if (error instanceof WorkflowUpdateFailedError) {
            console.error(`codegrep: budget refused: ${error.cause?.message ?? error.message}`);
            return 1;
          }
          throw error;
        }
      }
      await handle.signal(SIGNALS[action as keyof typeof SIGNALS]);
      const what = {
        pause: 'the running segment stops at its next checkpoint; `codegrep training resume` continues',
        resume: 'training continues from the newest checkpoint',
        stop: 'the running segment stops at its next checkpoint, then the report is written and the run ends',
      }[action as keyof typeof SIGNALS];
      console.log(`codegrep: ${action} sent to ${workflowId}: ${what}`);
      return 0;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) {
        console.error(`codegrep: no workflow ${workflowId} in namespace ${temporalConfig.namespace}`);
        return 1;
      }
      throw error;
    }
  } finally {
    await connection.close();
  }
}
