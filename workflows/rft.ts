import { ApplicationFailure, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type { ResolvedTeacher, RftResult, SampleRftShardOutput } from '../schemas/rft';
import { activityOptions } from './activity-options';
import { settleAll, trackedStep, validatedConfig } from './helpers';
import { PolicyServers, policyServeRequest } from './policy-server';
import { StageTracker } from './stage-tracker';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';

export const rftStages = ['plan', 'sample', 'fine-tune', 'report'] as const;

/**
 * The training section's chat template settings, so trainer.sft tokenizes an example exactly as GRPO renders the
 * same episode (the rft section's own `sft.trainer` keys win).
 */
function sameTokens(trainer: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(trainer).filter(([key]) => ['chat_template', 'chat_template_kwargs', 'dtype'].includes(key)));
}

export type RftInput = PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } };

/**
 * The warm start of training by rejection-sampling fine-tuning (CodeScout §4.1): environment samples ──plan──▶
 * the RFT instances and the RL training samples without them ──sample (teacher × instance shards, through the
 * training episode and reward)──▶ rollouts with per-level F1 ──keep the perfect ones──▶ trainer.sft on the GPU
 * worker ──▶ the checkpoint the training stage starts from (`init_from`), and `rft/trajectories.parquet`.
 * A teacher given as `policy: { run, checkpoint }` is served by the GPU worker for the sampling, then stopped,
 * so it never shares the GPU with the fine-tune.
 *
 * History bound: no signals reach this workflow; about 6 events per shard activity plus a few dozen (and a
 * served teacher's activity and its ready signal).
 */
export async function rft(input: RftInput): Promise<RftResult> {
  const { config, overrides } = await validatedConfig(input);
  const section = config.rft;
  const training = config.training;
  if (!section || !training) {
    throw ApplicationFailure.create({
      type: 'ConfigError',
      nonRetryable: true,
      message: 'the rft workflow needs an `rft` section (schemas/rft.ts) and a `training` section (the student) in the run config',
    });
  }
  const { findRunArtifact, planRftSampling, collectRftTrajectories, writeRftTrajectories } = proxyActivities<Activities>(
    activityOptions('short'),
  );
  const { sampleRftShard } = proxyActivities<Activities>(activityOptions('evaluation', overrides));
  const { fineTuneRft } = proxyActivities<Activities>({
    ...activityOptions('training', overrides),
    taskQueue: training.gpuTaskQueue,
  });

  const tracker = new StageTracker(config.runId, config.recipe, rftStages);
  const common = { runId: config.runId, runDir: config.runDir };
  const samples =
    input.artifacts?.samples ??
    (await findRunArtifact({ runDir: config.runDir, relativePath: RUN_ARTIFACTS.environmentSamples, producedBy: 'environment' }));
  const plan = await trackedStep(
    tracker,
    'plan',
    () => planRftSampling({ ...common, samples, rft: section, training }),
    (p) => `${p.instances} RFT instances in ${p.shardCount} shards`,
  );

  tracker.start('sample');
  let settledShards = 0;
  const showProgress = () => tracker.progress({ stage: 'sample', done: settledShards, total: plan.shardCount, unit: 'shards', counts: {} });
  showProgress();
  const sampleWith = (teacher: ResolvedTeacher) =>
    settleAll(
      Array.from({ length: plan.shardCount }, (_, shardIndex) => async () => {
        try {
          return await sampleRftShard({ ...common, rftSamples: plan.rftSamples, plan, teacher, rft: section, training, shardIndex });
        } finally {
          settledShards += 1;
          showProgress();
        }
      }),
      section.maxConcurrentShards,
    );
  let teacherLabel: string;
  let settled: PromiseSettledResult<SampleRftShardOutput>[];
  const teacher = section.teacher;
  if ('policy' in teacher) {
    const servers = new PolicyServers(overrides);
    const request = policyServeRequest(config, { name: 'rft-teacher', policy: teacher.policy }, config.evaluation.policyServer);
    [teacherLabel, settled] = await servers.serve(request, async (ready) => {
      const label = `${ready.runId}@step-${ready.step}`;
      const resolved = {
        baseUrl: ready.baseUrl,
        model: ready.model,
        identity: `${ready.runId}:${ready.step}:${ready.adapterSha256}`,
        label,
      };
      return [label, await sampleWith(resolved)] as const;
    });
  } else {
    teacherLabel = teacher.model;
    settled = await sampleWith({
      baseUrl: teacher.baseUrl,
      model: teacher.model,
      ...(teacher.apiKeyEnv ? { apiKeyEnv: teacher.apiKeyEnv } : {}),
      identity: `${teacher.model}@${teacher.baseUrl}`,
      label: teacher.model,
    });
  }
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) {
    tracker.finish('sample', 'failed', `${settled.filter((s) => s.status === 'rejected').length} of ${plan.shardCount} shards failed`);
    throw failure.reason;
  }
  const shards = settled.map((s) => (s as PromiseFulfilledResult<SampleRftShardOutput>).value);
  const collected = await collectRftTrajectories({ ...common, shards: shards.map((s) => s.shard) });
  const cachedShards = shards.filter((s) => s.cached).length;
  tracker.finish(
    'sample',
    cachedShards === shards.length ? 'cached' : 'completed',
    `${collected.kept} of ${collected.total} rollouts kept (${collected.failed} failed); ${cachedShards} shards cached`,
  );

  const sft = await trackedStep(
    tracker,
    'fine-tune',
    () =>
      fineTuneRft({
        ...common,
        examplesPath: collected.examplesPath,
        sampled: collected.sampled,
        sft: { ...section.sft, trainer: { ...sameTokens(training.trainer), ...section.sft.trainer } },
        modelDir: section.sft.modelDir ?? training.modelDir,
        python: training.python,
        recipe: 'codescout',
      }),
    (s) => `${s.steps} steps; checkpoint ${s.checkpoint}`,
  );
  const trajectories = await trackedStep(
    tracker,
    'report',
    () => writeRftTrajectories({ ...common, sampled: collected.sampled, tokensPath: sft.tokensPath }),
    (t) => `${t.rows} trajectories in ${t.uri}`,
  );
  tracker.complete();
  return {
    trajectories,
    trainingSamples: plan.trainingSamples,
    checkpoint: sft.checkpoint,
    sftSteps: sft.steps,
    sampled: collected.total,
    kept: collected.kept,
    failed: collected.failed,
    teacher: teacherLabel,
  };
}
