import { randomUUID } from 'node:crypto';
import { Context } from '@temporalio/activity';
import { Client, Connection, WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Activities } from '../../../activities';
import { RUN_ARTIFACTS } from '../../../lib/paths/run-artifacts';
import { workflowsPath } from '../../../workers/cpu';
import { temporalAddress, uniqueTaskQueue } from '../../support/temporal';

/**
 * The real workflow code on the real dev server, with every activity replaced by a test function (the idiom of
 * temporalio/samples-typescript's mocked-activity tests): the order of stages and activities, a failure surfaced
 * with the failing activity's name, a retryable failure retried, cancellation reaching a running activity, and
 * continue-as-new where the workflow uses it. Seconds each: no git, no Parquet, no trainer.
 */

type ActivityName = keyof Activities;
type Mock = (input: any) => Promise<unknown>; // eslint-disable-line @typescript-eslint/no-explicit-any

const ACTIVITY_NAMES: ActivityName[] = [
  'validateConfig',
  'mine',
  'judge',
  'weight',
  'writeCatmSummary',
  'findRunArtifact',
  'materializeWorktrees',
  'deriveGroundTruth',
  'planDownstream',
  'runDownstreamPair',
  'summarizeDownstream',
  'planEvaluation',
  'evaluateShard',
  'summarizeEvaluation',
  'trainSegment',
  'inspectTrainingRun',
  'writeTrainingReport',
  'recordValidation',
  'splitValidation',
  'publishToStore',
  'servePolicy',
  'reapPolicyServer',
  'planRftSampling',
  'sampleRftShard',
  'collectRftTrajectories',
  'fineTuneRft',
  'writeRftTrajectories',
];

/** Every activity call, in the order the worker ran them: `name` or `name#attempt` for a retry. */
let calls: string[] = [];
let mocks: Partial<Record<ActivityName, Mock>> = {};

const mockActivities = Object.fromEntries(
  ACTIVITY_NAMES.map((name) => [
    name,
    async (input: unknown) => {
      const attempt = Context.current().info.attempt;
      calls.push(attempt > 1 ? `${name}#${attempt}` : name);
      const mock = mocks[name];
      if (!mock) throw ApplicationFailure.nonRetryable(`the test set no mock for ${name}`, 'TestSetup');
      return mock(input);
    },
  ]),
);

let worker: Worker;
let running: Promise<void>;
let client: Client;
let clientConnection: Connection;
let taskQueue: string;

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  taskQueue = uniqueTaskQueue('mocked-activities');
  const connection = await NativeConnection.connect({ address: temporalAddress() });
  worker = await Worker.create({ connection, namespace: 'codegrep', taskQueue, workflowsPath, activities: mockActivities });
  running = worker.run();
  clientConnection = await Connection.connect({ address: temporalAddress() });
  client = new Client({ connection: clientConnection, namespace: 'codegrep' });
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await clientConnection?.close();
});

beforeEach(() => {
  calls = [];
  mocks = {};
});

const ref = (name: string) => ({ uri: `file:///run/${name}`, sha256: '0'.repeat(64), rows: 1, schema: name, schemaVersion: 1 });

/** What validateConfig returns: the fields the workflows read, for a run `runId` (the mocks never touch disk). */
function resolvedConfig(runId: string, extra: Record<string, unknown> = {}) {
  return {
    runId,
    runDir: `/nonexistent/${runId}`,
    dataDir: '/nonexistent',
    recipe: 'codegrep-v3',
    stages: ['catm'],
    inputs: { trajectories: '/nonexistent/t.jsonl', instances: '/nonexistent/i.jsonl' },
    judge: { mode: 'none' },
    temporal: { activityTimeouts: {} },
    environment: { repoSource: { kind: 'mirror-dir', dir: '/nonexistent/mirrors' }, cacheDir: '/c', worktreesDir: '/w' },
    evaluation: { retrievers: [{ name: 'bm25', kind: 'bm25', k: 2 }], maxConcurrentShards: 4, outputPerRun: false },
    ...extra,
  };
}

function catmMocks(): Partial<Record<ActivityName, Mock>> {
  return {
    mine: async () => ({ candidates: ref('candidates'), summary: { candidatesAfterTokenFilter: 3 } }),
    judge: async () => ({ judgements: ref('judgements'), mode: 'none', counts: { judged: 0 } }),
    weight: async () => ({ labels: ref('labels'), samples: ref('samples'), summary: { samplesWritten: 2 } }),
    writeCatmSummary: async () => ref('summary'),
  };
}

const start = (workflowType: string, runId: string, input: Record<string, unknown> = {}) =>
  client.workflow.start(workflowType, { taskQueue, workflowId: `${runId}/${workflowType}`, args: [{ runId, ...input }] });

const newRunId = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** The failure a workflow ended with (the run must fail). */
async function failureOf(result: Promise<unknown>): Promise<WorkflowFailedError> {
  const error = await result.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(WorkflowFailedError);
  return error as WorkflowFailedError;
}

describe('catm with mocked activities', () => {
  it('runs validateConfig → mine → judge → weight → writeCatmSummary, handing each its predecessor’s refs', async () => {
    const runId = newRunId('catm-order');
    const seen: Record<string, any> = {}; // eslint-disable-line @typescript-eslint/no-explicit-any
    const base = catmMocks();
    mocks = {
      validateConfig: async () => resolvedConfig(runId),
      ...base,
      judge: async (input) => ((seen.judge = input), base.judge!(input)),
      weight: async (input) => ((seen.weight = input), base.weight!(input)),
    };
    const handle = await start('catm', runId);
    const result = (await handle.result()) as { samples: { uri: string } };
    expect(calls).toEqual(['validateConfig', 'mine', 'judge', 'weight', 'writeCatmSummary']);
    expect(seen.judge.candidates.uri).toBe('file:///run/candidates');
    expect(seen.weight.judgements.uri).toBe('file:///run/judgements');
    expect(result.samples.uri).toBe('file:///run/samples');
    const progress = (await handle.query('progress')) as { done: boolean; stages: Record<string, { status: string }> };
    expect(progress.done).toBe(true);
    expect(Object.values(progress.stages).map((s) => s.status)).toEqual(['completed', 'completed', 'completed']);
  });

  it('a non-retryable failure ends the run at once, naming the activity and its error type; later activities never run', async () => {
    const runId = newRunId('catm-fail');
    mocks = {
      validateConfig: async () => resolvedConfig(runId),
      ...catmMocks(),
      judge: async () => {
        throw ApplicationFailure.nonRetryable('judge endpoint refused the API key', 'AuthenticationFailed');
      },
    };
    const failure = await failureOf((await start('catm', runId)).result());
    expect(failure.cause).toBeInstanceOf(ActivityFailure);
    const activity = failure.cause as ActivityFailure;
    expect(activity.activityType).toBe('judge');
    expect((activity.cause as ApplicationFailure).type).toBe('AuthenticationFailed');
    expect(activity.cause!.message).toContain('API key');
    expect(calls).toEqual(['validateConfig', 'mine', 'judge']);
  });

  it('a retryable failure is retried (the retry policy of temporal.config.ts) and the run completes', async () => {
    const runId = newRunId('catm-retry');
    let judgeAttempts = 0;
    const base = catmMocks();
    mocks = {
      validateConfig: async () => resolvedConfig(runId),
      ...base,
      judge: async (input) => {
        judgeAttempts += 1;
        if (judgeAttempts === 1) throw new Error('HTTP 503 from the judge endpoint');
        return base.judge!(input);
      },
    };
    await (await start('catm', runId)).result();
    expect(calls).toEqual(['validateConfig', 'mine', 'judge', 'judge#2', 'weight', 'writeCatmSummary']);
  });

  it('cancelling the workflow cancels the running activity (it sees the cancellation) and runs nothing after it', async () => {
    const runId = newRunId('catm-cancel');
    let activityCancelled = false;
    let mineStarted!: () => void;
    const started = new Promise<void>((resolve) => (mineStarted = resolve));
    mocks = {
      // A short heartbeat timeout: the SDK throttles heartbeats to 80% of it, and a cancellation reaches the
      // activity with the answer to a heartbeat.
      validateConfig: async () => resolvedConfig(runId, { temporal: { activityTimeouts: { mine: { heartbeatMs: 1_000 } } } }),
      ...catmMocks(),
      mine: async () => {
        const context = Context.current();
        mineStarted();
        const beat = setInterval(() => context.heartbeat(), 100);
        try {
          await context.cancelled;
        } catch (error) {
          activityCancelled = error instanceof CancelledFailure;
          throw error;
        } finally {
          clearInterval(beat);
        }
      },
    };
    const handle = await start('catm', runId);
    await started;
    await handle.cancel();
    const failure = await failureOf(handle.result());
    expect(failure.cause).toBeInstanceOf(CancelledFailure);
    await expect.poll(() => activityCancelled, { timeout: 10_000 }).toBe(true);
    expect(calls).toEqual(['validateConfig', 'mine']);
  });
});

describe('environment with mocked activities', () => {
  it('finds CATM’s samples at their run path, then materializes worktrees, then derives ground truth', async () => {
    const runId = newRunId('env-order');
    let asked: { relativePath: string; producedBy: string } | undefined;
    mocks = {
      validateConfig: async () => resolvedConfig(runId),
      findRunArtifact: async (input) => ((asked = input), ref('catm-samples')),
      materializeWorktrees: async (input) => {
        expect(input.samples.uri).toBe('file:///run/catm-samples');
        return {
          worktrees: ref('worktrees'),
          dropped: null,
          summary: { commits: 1, created: 1, reused: 0, droppedSamples: 0, failed: 0 },
        };
      },
      deriveGroundTruth: async () => ({ samples: ref('env-samples'), summary: { withGroundTruth: 1, samples: 1 } }),
    };
    const result = (await (await start('environment', runId)).result()) as { samples: { uri: string } };
    expect(calls).toEqual(['validateConfig', 'findRunArtifact', 'materializeWorktrees', 'deriveGroundTruth']);
    expect(asked).toMatchObject({ relativePath: RUN_ARTIFACTS.catmSamples, producedBy: 'catm' });
    expect(result.samples.uri).toBe('file:///run/env-samples');
  });

  it('a repository that cannot be materialized fails the stage with the worktrees activity named', async () => {
    const runId = newRunId('env-fail');
    mocks = {
      validateConfig: async () => resolvedConfig(runId),
      findRunArtifact: async () => ref('catm-samples'),
      materializeWorktrees: async () => {
        throw ApplicationFailure.nonRetryable('acme/widgets: no mirror in environment.repoSource', 'InvalidInput');
      },
    };
    const failure = await failureOf((await start('environment', runId)).result());
    expect((failure.cause as ActivityFailure).activityType).toBe('materializeWorktrees');
    expect(calls).toEqual(['validateConfig', 'findRunArtifact', 'materializeWorktrees']);
  });
});

describe('evaluation with mocked activities', () => {
  const evaluationMocks = (runId: string, failShard?: number): Partial<Record<ActivityName, Mock>> => ({
    validateConfig: async () => resolvedConfig(runId),
    findRunArtifact: async () => ref('env-samples'),
    planEvaluation: async () => ({
      instances: 4,
      shardCount: 2,
      outputDir: `/nonexistent/${runId}/evaluation`,
      retrievers: [{ name: 'bm25', kind: 'bm25' }],
    }),
    evaluateShard: async (input) => {
      if (input.shardIndex === failShard) throw ApplicationFailure.nonRetryable(`shard ${failShard}: bad sample row`, 'InvalidInput');
      return { shard: ref(`shard-${input.shardIndex}`), cached: false };
    },
    summarizeEvaluation: async (input) => ({ report: { markdown: 'table' }, shardsSeen: input.shards }),
  });

  it('plans, runs every shard of every retriever, then summarizes the shards it got', async () => {
    const runId = newRunId('eval-order');
    mocks = evaluationMocks(runId);
    const result = (await (await start('evaluation', runId)).result()) as {
      shards: { total: number; failed: number };
      shardsSeen: { retriever: string; refs: { uri: string }[] }[];
    };
    expect(calls.slice(0, 3)).toEqual(['validateConfig', 'findRunArtifact', 'planEvaluation']);
    expect(calls.slice(3, 5).sort()).toEqual(['evaluateShard', 'evaluateShard']);
    expect(calls[5]).toBe('summarizeEvaluation');
    expect(result.shards).toMatchObject({ total: 2, failed: 0 });
    expect(result.shardsSeen[0]!.refs.map((r) => r.uri)).toEqual(['file:///run/shard-0', 'file:///run/shard-1']);
  });

  it('a shard that fails with a retryable error is retried and its retry’s result is summarized', async () => {
    const runId = newRunId('eval-retry');
    const base = evaluationMocks(runId);
    let shard1Attempts = 0;
    mocks = {
      ...base,
      evaluateShard: async (input) => {
        if (input.shardIndex === 1 && ++shard1Attempts === 1) throw new Error('ECONNRESET from the retriever endpoint');
        return base.evaluateShard!(input);
      },
    };
    const result = (await (await start('evaluation', runId)).result()) as { shards: { total: number; failed: number } };
    expect(calls.filter((c) => c.startsWith('evaluateShard')).sort()).toEqual(['evaluateShard', 'evaluateShard', 'evaluateShard#2']);
    expect(result.shards).toMatchObject({ total: 2, failed: 0 });
  });

  it('a retriever whose every shard cannot finish fails the stage with the retriever and the reason', async () => {
    const runId = newRunId('eval-fail');
    mocks = evaluationMocks(runId, 1);
    const failure = await failureOf((await start('evaluation', runId)).result());
    const cause = failure.cause as ApplicationFailure;
    expect(cause.type).toBe('EvaluationFailed');
    expect(cause.message).toMatch(/bm25: .*shard 1: bad sample row/);
    expect(calls).not.toContain('summarizeEvaluation');
  });
});

describe('downstream with mocked activities', () => {
  const downstreamSection = {
    // No `agent` configuration: the workflow serves no policy (the plan's configurations come from the mock).
    configurations: [],
    concurrency: 2,
    agent: { kind: 'builtin' },
    harness: { kind: 'local' },
    runTimeoutMs: 60_000,
    bootstrap: { samples: 10, seed: 1, confidence: 0.95 },
  };
  const downstreamMocks = (runId: string, failing?: string): Partial<Record<ActivityName, Mock>> => ({
    validateConfig: async () => resolvedConfig(runId, { downstream: downstreamSection }),
    planDownstream: async () => ({
      plan: ref('plan'),
      pending: {
        configurations: ['baseline', 'bm25'],
        instanceIds: ['a-1', 'b-2'],
        pairs: [
          [0, 0],
          [0, 1],
          [1, 0],
          [1, 1],
        ],
      },
      finished: 0,
      total: 4,
      instances: 2,
      warnings: [],
    }),
    runDownstreamPair: async (input) => {
      if (`${input.configuration}/${input.instanceId}` === failing)
        throw ApplicationFailure.nonRetryable('the agent could not start', 'AgentFailed');
      return { row: { resolved: input.configuration === 'bm25' } };
    },
    summarizeDownstream: async () => ({ tableValues: { rows: [{ configuration: 'bm25', resolveRate: 1 }] } }),
  });

  it('plans, runs every (configuration, instance) pair in lanes, then summarizes', async () => {
    const runId = newRunId('ds-order');
    mocks = downstreamMocks(runId);
    const result = (await (await start('downstream', runId)).result()) as { ran: number; pairs: number };
    expect(calls[0]).toBe('validateConfig');
    expect(calls[1]).toBe('planDownstream');
    expect(calls.slice(2, 6)).toEqual(['runDownstreamPair', 'runDownstreamPair', 'runDownstreamPair', 'runDownstreamPair']);
    expect(calls[6]).toBe('summarizeDownstream');
    expect(result).toMatchObject({ ran: 4, pairs: 4 });
  });

  it('a pair that fails with a retryable error is retried, and the stage completes', async () => {
    const runId = newRunId('ds-retry');
    const base = downstreamMocks(runId);
    let attempts = 0;
    mocks = {
      ...base,
      runDownstreamPair: async (input) => {
        if (`${input.configuration}/${input.instanceId}` === 'baseline/b-2' && ++attempts === 1)
          throw new Error('docker daemon restarting');
        return base.runDownstreamPair!(input);
      },
    };
    const result = (await (await start('downstream', runId)).result()) as { ran: number };
    expect(calls.filter((c) => c.startsWith('runDownstreamPair')).sort()).toEqual([
      'runDownstreamPair',
      'runDownstreamPair',
      'runDownstreamPair',
      'runDownstreamPair',
      'runDownstreamPair#2',
    ]);
    expect(result.ran).toBe(4);
  });

  it('a pair that cannot run fails the stage naming the pair, after the other pairs ran; no summary', async () => {
    const runId = newRunId('ds-fail');
    mocks = downstreamMocks(runId, 'bm25/a-1');
    const failure = await failureOf((await start('downstream', runId)).result());
    const cause = failure.cause as ApplicationFailure;
    expect(cause.type).toBe('DownstreamRunsFailed');
    expect(cause.message).toContain('(bm25, a-1)');
    expect(cause.message).toContain('the agent could not start');
    expect(calls.filter((c) => c === 'runDownstreamPair')).toHaveLength(4);
    expect(calls).not.toContain('summarizeDownstream');
  });
});

describe('training with mocked activities', () => {
  const trainingSection = (gpuTaskQueue: string) => ({
    recipe: 'v3',
    steps: 3,
    segmentSteps: 1,
    maxSegmentsPerRun: 2,
    gpuTaskQueue,
    modelDir: '/nonexistent/model',
    smokeRun: false,
    progressEveryMs: 1000,
  });

  it('runs segments up to the budget, continues as new after maxSegmentsPerRun carrying its step, then reports', async () => {
    const runId = newRunId('train-can');
    const segments: { segment: number; fromStep: number; targetStep: number }[] = [];
    mocks = {
      validateConfig: async () => resolvedConfig(runId, { training: trainingSection(taskQueue) }),
      findRunArtifact: async (input) => {
        expect(input.relativePath).toBe(RUN_ARTIFACTS.environmentSamples);
        return ref('env-samples');
      },
      inspectTrainingRun: async () => ({ checkpointStep: null, checkpoint: null, lastSegment: 0 }),
      trainSegment: async (input) => {
        segments.push({ segment: input.segment, fromStep: input.fromStep, targetStep: input.targetStep });
        return { step: input.targetStep, checkpoint: `/ck/${input.targetStep}`, latest: null };
      },
      writeTrainingReport: async (input) => ({ steps: input.step, plots: [], html: ref('report') }),
    };
    const handle = await start('training', runId);
    const result = (await handle.result()) as { step: number; segments: number; checkpoint: string };
    expect(result).toMatchObject({ step: 3, segments: 3, checkpoint: '/ck/3' });
    expect(segments).toEqual([
      { segment: 1, fromStep: 0, targetStep: 1 },
      { segment: 2, fromStep: 1, targetStep: 2 },
      { segment: 3, fromStep: 2, targetStep: 3 },
    ]);
    // The continuation neither looks for the samples nor inspects the run again: both travel in its input.
    expect(calls).toEqual([
      'validateConfig',
      'findRunArtifact',
      'inspectTrainingRun',
      'trainSegment',
      'trainSegment',
      'validateConfig',
      'trainSegment',
      'writeTrainingReport',
    ]);
    const first = client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId);
    const history = await first.fetchHistory();
    const last = history.events!.at(-1)!;
    expect(last.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
  });

  it('pause cancels the running segment (the activity sees it and returns its checkpoint); resume trains on from there', async () => {
    const runId = newRunId('train-pause');
    let segmentStarted!: () => void;
    const started = new Promise<void>((resolve) => (segmentStarted = resolve));
    let sawCancellation = false;
    mocks = {
      validateConfig: async () =>
        resolvedConfig(runId, {
          training: { ...trainingSection(taskQueue), steps: 2, segmentSteps: 2, maxSegmentsPerRun: undefined },
          temporal: { activityTimeouts: { training: { heartbeatMs: 1_000 } } },
        }),
      findRunArtifact: async () => ref('env-samples'),
      inspectTrainingRun: async () => ({ checkpointStep: null, checkpoint: null, lastSegment: 0 }),
      trainSegment: async (input) => {
        if (input.segment > 1) return { step: input.targetStep, checkpoint: `/ck/${input.targetStep}`, latest: null };
        // The first segment reaches step 1 and waits; a pause cancels it, and it reports the checkpoint it has
        // (what lib/training does when the workflow asks it to stop).
        const context = Context.current();
        segmentStarted();
        const beat = setInterval(() => context.heartbeat({ step: 1 }), 100);
        try {
          await context.cancelled;
        } catch {
          sawCancellation = true;
        } finally {
          clearInterval(beat);
        }
        return { step: 1, checkpoint: '/ck/1', latest: null };
      },
      writeTrainingReport: async (input) => ({ steps: input.step, plots: [], html: ref('report') }),
    };
    const handle = await start('training', runId);
    await started;
    await handle.signal('pause');
    // WAIT_CANCELLATION_COMPLETED: the segment counts as running until the cancelled activity has returned.
    const status = () => handle.query('trainingStatus') as Promise<{ state: string; segmentRunning: boolean; step: number }>;
    await expect.poll(async () => (await status()).segmentRunning, { timeout: 15_000 }).toBe(false);
    expect(await status()).toMatchObject({ state: 'paused', step: 1 });
    expect(sawCancellation).toBe(true);
    await handle.signal('resume');
    const result = (await handle.result()) as { step: number; segments: number };
    expect(result).toMatchObject({ step: 2, segments: 2 });
    expect(calls).toEqual([
      'validateConfig',
      'findRunArtifact',
      'inspectTrainingRun',
      'trainSegment',
      'trainSegment',
      'writeTrainingReport',
    ]);
  });

  it('a segment that fails for good fails the run with the segment activity named; no report', async () => {
    const runId = newRunId('train-fail');
    mocks = {
      validateConfig: async () => resolvedConfig(runId, { training: { ...trainingSection(taskQueue), maxSegmentsPerRun: undefined } }),
      findRunArtifact: async () => ref('env-samples'),
      inspectTrainingRun: async () => ({ checkpointStep: null, checkpoint: null, lastSegment: 0 }),
      trainSegment: async () => {
        throw ApplicationFailure.nonRetryable('the trainer refused its config', 'TrainerConfigError');
      },
    };
    const failure = await failureOf((await start('training', runId)).result());
    expect((failure.cause as ActivityFailure).activityType).toBe('trainSegment');
    expect(((failure.cause as ActivityFailure).cause as ApplicationFailure).type).toBe('TrainerConfigError');
    expect(calls).not.toContain('writeTrainingReport');
  });
});

describe('pipeline with mocked activities', () => {
  it('runs the stages as child workflows in order; a failed stage skips the stages that need it and fails the pipeline', async () => {
    const runId = newRunId('pipe');
    mocks = {
      validateConfig: async () => resolvedConfig(runId, { stages: ['catm', 'environment', 'evaluation'] }),
      ...catmMocks(),
      materializeWorktrees: async (input) => {
        // The environment stage got CATM's samples from the pipeline, not by looking them up.
        expect(input.samples.uri).toBe('file:///run/samples');
        throw ApplicationFailure.nonRetryable('acme/widgets: no mirror', 'InvalidInput');
      },
    };
    const handle = await client.workflow.start('pipeline', { taskQueue, workflowId: runId, args: [{ runId }] });
    const failure = await failureOf(handle.result());
    const cause = failure.cause as ApplicationFailure;
    expect(cause.type).toBe('PipelineStageFailed');
    const details = cause.details![0] as { outcomes: { stage: string; status: string; reason: string | null }[] };
    expect(details.outcomes.map((o) => [o.stage, o.status])).toEqual([
      ['catm', 'completed'],
      ['environment', 'failed'],
      ['evaluation', 'skipped'],
    ]);
    expect(details.outcomes[1]!.reason).toContain('acme/widgets');
    expect(calls).toEqual([
      'validateConfig', // the pipeline
      'validateConfig', // catm
      'mine',
      'judge',
      'weight',
      'writeCatmSummary',
      'validateConfig', // environment
      'materializeWorktrees',
    ]);
    // The child's own failure names its activity.
    const child = await failureOf(client.workflow.getHandle(`${runId}/environment`).result());
    expect((child.cause as ActivityFailure).activityType).toBe('materializeWorktrees');
  });
});

describe('rft with mocked activities', () => {
  const SHARDS = 3;
  /** The rft and training sections the workflow reads; the student's GPU queue is this test's worker. */
  const rftConfig = (runId: string, teacher: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    resolvedConfig(runId, {
      rft: { teacher, maxConcurrentShards: 2, sft: { trainer: { learning_rate: 1e-5, dtype: 'float32' } } },
      training: {
        gpuTaskQueue: taskQueue,
        modelDir: '/nonexistent/model',
        python: '/nonexistent/python',
        trainer: { chat_template: 'qwen3', dtype: 'bfloat16', learning_rate: 3e-6 },
      },
      ...extra,
    });
  const apiTeacher = { model: 'teacher-model', baseUrl: 'http://127.0.0.1:9/v1' };

  function rftMocks(runId: string, teacher: Record<string, unknown> = apiTeacher): Partial<Record<ActivityName, Mock>> {
    return {
      validateConfig: async () => rftConfig(runId, teacher),
      findRunArtifact: async (input) => {
        expect(input.relativePath).toBe(RUN_ARTIFACTS.environmentSamples);
        return ref('env-samples');
      },
      planRftSampling: async () => ({
        instances: 6,
        shardCount: SHARDS,
        rftSamples: ref('rft-samples'),
        trainingSamples: ref('training-samples'),
      }),
      sampleRftShard: async (input) => ({ shard: ref(`shard-${input.shardIndex}`), cached: false, sampled: 2, kept: 1, failed: 0 }),
      collectRftTrajectories: async (input) => {
        // Every shard's rollouts, in shard order, whatever order the shards finished in.
        expect(input.shards.map((shard: { uri: string }) => shard.uri)).toEqual(
          Array.from({ length: SHARDS }, (_, index) => `file:///run/shard-${index}`),
        );
        return { sampled: ref('sampled'), examplesPath: '/run/rft/examples.jsonl', total: 6, kept: 3, failed: 0 };
      },
      fineTuneRft: async () => ({
        checkpoint: '/run/rft/checkpoint',
        steps: 12,
        metrics: ref('sft-metrics'),
        tokensPath: '/run/rft/tokens.jsonl',
      }),
      writeRftTrajectories: async () => ref('trajectories'),
    };
  }

  it('plans, samples every shard, keeps the perfect rollouts, fine-tunes on the GPU queue with the training chat template, then writes the trajectories', async () => {
    const runId = newRunId('rft');
    let fineTuneInput: Record<string, any> = {}; // eslint-disable-line @typescript-eslint/no-explicit-any
    const base = rftMocks(runId);
    mocks = {
      ...base,
      fineTuneRft: async (input) => {
        fineTuneInput = input;
        return base.fineTuneRft!(input);
      },
    };
    const result = (await (await start('rft', runId)).result()) as Record<string, unknown>;
    expect(result).toMatchObject({
      checkpoint: '/run/rft/checkpoint',
      sftSteps: 12,
      sampled: 6,
      kept: 3,
      failed: 0,
      teacher: 'teacher-model',
    });
    expect(calls).toEqual([
      'validateConfig',
      'findRunArtifact',
      'planRftSampling',
      ...Array.from({ length: SHARDS }, () => 'sampleRftShard'),
      'collectRftTrajectories',
      'fineTuneRft',
      'writeRftTrajectories',
    ]);
    // The SFT tokenizes as GRPO will (the training section's chat template and dtype); the rft section's own keys win.
    expect(fineTuneInput.sft.trainer).toEqual({ chat_template: 'qwen3', dtype: 'float32', learning_rate: 1e-5 });
    expect(fineTuneInput).toMatchObject({
      modelDir: '/nonexistent/model',
      python: '/nonexistent/python',
      examplesPath: '/run/rft/examples.jsonl',
    });
  });

  it('a shard that cannot be sampled fails the stage after the other shards settled, naming sampleRftShard; no fine-tune', async () => {
    const runId = newRunId('rft-fail');
    const base = rftMocks(runId);
    mocks = {
      ...base,
      sampleRftShard: async (input) => {
        if (input.shardIndex === 1) throw ApplicationFailure.nonRetryable('the teacher refused the API key', 'AuthenticationFailed');
        return base.sampleRftShard!(input);
      },
    };
    const failure = await failureOf((await start('rft', runId)).result());
    expect((failure.cause as ActivityFailure).activityType).toBe('sampleRftShard');
    expect(((failure.cause as ActivityFailure).cause as ApplicationFailure).type).toBe('AuthenticationFailed');
    expect(calls.filter((call) => call === 'sampleRftShard')).toHaveLength(SHARDS);
    expect(calls).not.toContain('collectRftTrajectories');
    expect(calls).not.toContain('fineTuneRft');
  });

  it('a shard that fails with a retryable error is retried and the stage completes', async () => {
    const runId = newRunId('rft-retry');
    const base = rftMocks(runId);
    let failedOnce = false;
    mocks = {
      ...base,
      sampleRftShard: async (input) => {
        if (input.shardIndex === 2 && !failedOnce) {
          failedOnce = true;
          throw new Error('HTTP 503 from the teacher endpoint');
        }
        return base.sampleRftShard!(input);
      },
    };
    await (await start('rft', runId)).result();
    expect(calls).toContain('sampleRftShard#2');
    expect(calls.slice(-3)).toEqual(['collectRftTrajectories', 'fineTuneRft', 'writeRftTrajectories']);
  });

  it('cancelling the run cancels the running fine-tune (it sees the cancellation); nothing runs after it', async () => {
    const runId = newRunId('rft-cancel');
    let fineTuneStarted!: () => void;
    const started = new Promise<void>((resolve) => (fineTuneStarted = resolve));
    let activityCancelled = false;
    mocks = {
      ...rftMocks(runId),
      validateConfig: async () => rftConfig(runId, apiTeacher, { temporal: { activityTimeouts: { training: { heartbeatMs: 1_000 } } } }),
      fineTuneRft: async () => {
        const context = Context.current();
        fineTuneStarted();
        const beat = setInterval(() => context.heartbeat({ step: 1, checkpointStep: null }), 100);
        try {
          await context.cancelled;
        } catch (error) {
          activityCancelled = error instanceof CancelledFailure;
          throw error;
        } finally {
          clearInterval(beat);
        }
      },
    };
    const handle = await start('rft', runId);
    await started;
    await handle.cancel();
    const failure = await failureOf(handle.result());
    expect(failure.cause).toBeInstanceOf(CancelledFailure);
    await expect.poll(() => activityCancelled, { timeout: 10_000 }).toBe(true);
    expect(calls).not.toContain('writeRftTrajectories');
  });

  it('a teacher given as a trained policy is served on the GPU queue for the sampling, and stopped before the fine-tune', async () => {
    const runId = newRunId('rft-served');
    let serverCancelled = false;
    const sampledWith: string[] = [];
    const base = rftMocks(runId, { policy: { run: 'earlier-run', checkpoint: 4 } });
    mocks = {
      ...base,
      validateConfig: async () => ({
        // A short heartbeat timeout: the cancellation of the scope reaches the server with a heartbeat's answer.
        ...rftConfig(
          runId,
          { policy: { run: 'earlier-run', checkpoint: 4 } },
          { temporal: { activityTimeouts: { policyServer: { heartbeatMs: 1_000 } } } },
        ),
        evaluation: {
          retrievers: [],
          maxConcurrentShards: 4,
          outputPerRun: false,
          policyServer: { backend: 'hf', host: '127.0.0.1', readyTimeoutMs: 60_000 },
        },
      }),
      servePolicy: async (input) => {
        // What activities/policy-server.ts does once its server answers: tell the owner where it is, then serve
        // until the owner's scope cancels it.
        const context = Context.current();
        await client.workflow.getHandle(input.ownerWorkflowId).signal('policyServerReady', {
          requestId: input.requestId,
          attempt: 1,
          runId: 'earlier-run',
          step: 4,
          adapterSha256: 'a'.repeat(64),
          baseModel: 'tiny',
          model: 'earlier-run/step-00000004',
          baseUrl: 'http://127.0.0.1:9/v1',
          backend: 'hf',
          requestLog: '/nonexistent/requests.jsonl',
          trainedWith: { recipe: 'codescout', answerFormat: 'tool', maxTurns: 4 },
        });
        const beat = setInterval(() => context.heartbeat({ port: 9, pid: 1, step: 4 }), 100);
        try {
          await context.cancelled;
        } catch {
          serverCancelled = true;
        } finally {
          clearInterval(beat);
        }
      },
      reapPolicyServer: async () => ({ action: 'none' }),
      sampleRftShard: async (input) => {
        sampledWith.push(`${input.teacher.model} ${input.teacher.baseUrl}`);
        return base.sampleRftShard!(input);
      },
    };
    const result = (await (await start('rft', runId)).result()) as { teacher: string };
    expect(result.teacher).toBe('earlier-run@step-4');
    expect(sampledWith).toEqual(Array.from({ length: SHARDS }, () => 'earlier-run/step-00000004 http://127.0.0.1:9/v1'));
    expect(serverCancelled).toBe(true);
    // The server's scope settled (and was reaped) before the fine-tune took the GPU.
    const fineTune = calls.indexOf('fineTuneRft');
    expect(calls.indexOf('servePolicy')).toBeLessThan(calls.indexOf('sampleRftShard'));
    expect(calls.indexOf('reapPolicyServer')).toBeGreaterThan(calls.lastIndexOf('sampleRftShard'));
    expect(calls.indexOf('reapPolicyServer')).toBeLessThan(fineTune);
  });
});
