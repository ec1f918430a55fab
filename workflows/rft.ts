import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ResolvedConfig } from '../lib/config';
import type { ArtifactRef } from '../schemas/artifact-ref';
import type { PipelineConfigInput } from '../schemas/config';
import type {
  CollectRftOutput,
  FineTuneRftInput,
  ResolvedTeacher,
  RftConfig,
  RftPlan,
  RftResult,
  SampleRftShardOutput,
} from '../schemas/rft';
import { activityOptions, type TimeoutOverrides } from './activity-options';
import { missingSection, settleAll, shardCounter, stageSamples, trackedStep, validatedConfig } from './helpers';
import { PolicyServers, policyServeRequest } from './policy-server';
import { StageTracker } from './stage-tracker';
import type { TrainingSection } from './training-run';

export const rftStages = ['plan', 'sample', 'fine-tune', 'report'] as const;

/**
 * The training section's chat template settings, so trainer.sft tokenizes an example exactly as GRPO renders the
 * same episode (the rft section's own `sft.trainer` keys win).
 */
function sameTokens(trainer: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(trainer).filter(([key]) => ['chat_template', 'chat_template_kwargs', 'dtype'].includes(key)));
}

export type RftInput = PipelineConfigInput & { artifacts?: { samples?: ArtifactRef } };

/** What every step of one RFT run reads: the run config, its two sections, the stage table. */
interface RftRun {
  config: ResolvedConfig;
  overrides: TimeoutOverrides;
  section: RftConfig;
  training: TrainingSection;
  tracker: StageTracker;
  common: { runId: string; runDir: string };
}

/** Settles every shard of the plan, sampled with one teacher. */
type ShardSampler = (teacher: ResolvedTeacher) => Promise<PromiseSettledResult<SampleRftShardOutput>[]>;

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
  const { section, training } = rftSections(config);
  const { planRftSampling, writeRftTrajectories } = proxyActivities<Activities>(activityOptions('short'));
  const { fineTuneRft } = proxyActivities<Activities>({ ...activityOptions('training', overrides), taskQueue: training.gpuTaskQueue });
  const tracker = new StageTracker(config.runId, config.recipe, rftStages);
  const run: RftRun = { config, overrides, section, training, tracker, common: { runId: config.runId, runDir: config.runDir } };
  const { common } = run;

  const samples = await stageSamples(input, config.runDir, 'environment');
  const plan = await trackedStep(
    tracker,
    'plan',
    () => planRftSampling({ ...common, samples, rft: section, training }),
    (p) => `${p.instances} RFT instances in ${p.shardCount} shards`,
  );
  const { collected, teacher } = await sampleStep(run, plan);
  const sft = await trackedStep(
    tracker,
    'fine-tune',
    () => fineTuneRft(fineTuneInput(run, collected)),
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
    teacher,
  };
}

/** The two sections an RFT run needs: its own and the training section of the student it warms up. */
function rftSections(config: ResolvedConfig): { section: RftConfig; training: TrainingSection } {
  const section = config.rft;
  const training = config.training;
  if (!section || !training) {
    throw missingSection(
      'the rft workflow needs an `rft` section (schemas/rft.ts) and a `training` section (the student) in the run config',
    );
  }
  return { section, training };
}

/**
 * The sample step: every shard through the teacher, then the perfect rollouts collected. One failed shard fails
 * the stage, since the kept set would depend on which shards happened to finish.
 */
async function sampleStep(run: RftRun, plan: RftPlan): Promise<{ collected: CollectRftOutput; teacher: string }> {
  const { tracker, common, section } = run;
  const { collectRftTrajectories } = proxyActivities<Activities>(activityOptions('short'));
  const { sampleRftShard } = proxyActivities<Activities>(activityOptions('evaluation', run.overrides));
  tracker.start('sample');
  const counted = shardCounter(tracker, 'sample', plan.shardCount);
  const sampleWith: ShardSampler = (teacher) =>
    settleAll(
      Array.from({ length: plan.shardCount }, (_, shardIndex) =>
        counted(() =>
          sampleRftShard({ ...common, rftSamples: plan.rftSamples, plan, teacher, rft: section, training: run.training, shardIndex }),
        ),
      ),
      section.maxConcurrentShards,
    );
  const [teacher, settled] = await sampleWithTeacher(run, sampleWith);
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
  return { collected, teacher };
}

/** Samples with the section's teacher, and names it: a trained policy is served by the GPU worker meanwhile. */
async function sampleWithTeacher(
  run: RftRun,
  sampleWith: ShardSampler,
): Promise<readonly [string, PromiseSettledResult<SampleRftShardOutput>[]]> {
  const teacher = run.section.teacher;
  if ('policy' in teacher) {
    const servers = new PolicyServers(run.overrides);
    const request = policyServeRequest(run.config, { name: 'rft-teacher', policy: teacher.policy }, run.config.evaluation.policyServer);
    return servers.serve(request, async (ready) => {
      const label = `${ready.runId}@step-${ready.step}`;
      const resolved = {
        baseUrl: ready.baseUrl,
        model: ready.model,
        identity: `${ready.runId}:${ready.step}:${ready.adapterSha256}`,
        label,
      };
      return [label, await sampleWith(resolved)] as const;
    });
  }
  const settled = await sampleWith({
    baseUrl: teacher.baseUrl,
    model: teacher.model,
    ...(teacher.apiKeyEnv ? { apiKeyEnv: teacher.apiKeyEnv } : {}),
    identity: `${teacher.model}@${teacher.baseUrl}`,
    label: teacher.model,
  });
  return [teacher.model, settled] as const;
}

/** trainer.sft on the kept rollouts, with the student's model and tokenization unless the rft section sets them. */
function fineTuneInput(run: RftRun, collected: CollectRftOutput): FineTuneRftInput {
  const { section, training } = run;
  return {
    ...run.common,
    examplesPath: collected.examplesPath,
    sampled: collected.sampled,
    sft: { ...section.sft, trainer: { ...sameTokens(training.trainer), ...section.sft.trainer } },
    modelDir: section.sft.modelDir ?? training.modelDir,
    python: training.python,
    recipe: 'codescout',
  };
}
