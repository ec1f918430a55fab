import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CatmResult } from '../schemas/catm';
import type { PipelineConfigInput } from '../schemas/config';
import { activityOptions } from './activity-options';
import { trackedStep, validatedConfig } from './helpers';
import { StageTracker } from './stage-tracker';

export const catmStages = ['mine', 'judge', 'weight'] as const;

/**
 * CATM label mining, CodeGrep §3.4 (Fig. 1): trajectories ──mine──▶ file views ──judge──▶ judgements
 * ──weight──▶ labels + samples. Each arrow is one activity; each box a Parquet artifact.
 *
 * History bound (README "History bounds"): four activities and no signals (a running activity's progress is in its
 * heartbeats): under 60 events, however many candidates the judge reads.
 */
export async function catm(input: PipelineConfigInput): Promise<CatmResult> {
  const { config, overrides } = await validatedConfig(input);
  const { mine } = proxyActivities<Activities>(activityOptions('mine', overrides));
  const { judge } = proxyActivities<Activities>(activityOptions('judge', overrides));
  const { weight, writeCatmSummary } = proxyActivities<Activities>(activityOptions('weight', overrides));

  const tracker = new StageTracker(config.runId, config.recipe, catmStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const { inputs } = config;

  const mined = await trackedStep(
    tracker,
    'mine',
    () => mine({ ...common, trajectoriesPath: inputs.trajectories }),
    (m) => `${m.summary.candidatesAfterTokenFilter} candidates`,
  );
  const judged = await trackedStep(
    tracker,
    'judge',
    () => judge({ ...common, candidates: mined.candidates, instancesPath: inputs.instances, judge: config.judge }),
    (j) => (j.mode === 'none' ? 'judge: none (all candidates kept)' : undefined),
  );
  const weighted = await trackedStep(
    tracker,
    'weight',
    () => weight({ ...common, candidates: mined.candidates, judgements: judged.judgements, instancesPath: inputs.instances }),
    (w) => `${w.summary.samplesWritten} samples`,
  );

  const summaryValues = {
    runId: config.runId,
    mining: mined.summary,
    judge: { ...judged.counts, mode: judged.mode },
    weighting: weighted.summary,
  };
  const summary = await writeCatmSummary({
    runDir: config.runDir,
    summary: summaryValues,
    inputs: [mined.candidates, judged.judgements, weighted.labels, weighted.samples],
  });
  tracker.complete();
  return {
    candidates: mined.candidates,
    judgements: judged.judgements,
    labels: weighted.labels,
    samples: weighted.samples,
    summary,
    summaryValues,
  };
}
