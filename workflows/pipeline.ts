import { executeChild, proxyActivities, ParentClosePolicy, upsertMemo } from '@temporalio/workflow';
import type * as activities from '../activities';
import type { CatmResult } from '../schemas/catm';
import type { PipelineConfigInput } from '../schemas/config';
import { activityOptions } from './activity-options';
import { catm } from './catm';
import { StageTracker } from './stage-tracker';

export interface PipelineResult {
  runId: string;
  catm: CatmResult | null;
}

/**
 * The whole study as in SPEC §1: each stage a child workflow with id `<runId>/<stage>`, run in order.
 * Later stages (environment, evaluation, training, downstream) plug in here.
 */
export async function pipeline(input: PipelineConfigInput): Promise<PipelineResult> {
  const { validateConfig } = proxyActivities<typeof activities>(activityOptions('short'));
  const config = await validateConfig(input);
  const tracker = new StageTracker(config.runId, config.recipe, config.stages);
  upsertMemo({ config: { runId: config.runId, recipe: config.recipe, stages: config.stages, inputs: config.inputs, judge: config.judge.mode } });

  const result: PipelineResult = { runId: config.runId, catm: null };

  if (config.stages.includes('catm')) {
    const workflowId = `${config.runId}/catm`;
    tracker.child('catm', workflowId);
    tracker.start('catm');
    result.catm = await executeChild(catm, {
      workflowId,
      args: [config],
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      memo: { stage: 'catm', runId: config.runId },
    });
    tracker.finish('catm', 'completed', `${result.catm.summaryValues.weighting.samplesWritten} samples`);
  }

  tracker.complete();
  return result;
}
