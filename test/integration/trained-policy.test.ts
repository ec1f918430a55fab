import { execFileSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { isProcessAlive } from '../../lib/process';
import type { PipelineResult } from '../../workflows/pipeline';
import { spawnGpuWorkerProcess } from '../support/gpu-worker';
import { repoRoot } from '../support/repo-root';
import { startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { killWorkerProcess, startWorker, testClient, uniqueTaskQueue } from '../support/temporal';
import { agentScript, buildCalcFixture, pythonWithPytest, type CalcFixture } from './downstream-fixture';

/**
 * The trained policy measured by the pipeline itself, on the real dev server: catm → environment → training
 * (the real trainer, a tiny random model, 2 GRPO steps on the CPU) → evaluation with an agent retriever
 * `policy: trained` (the GPU worker serves the run's newest checkpoint with trainer/serve.py and stops it
 * when the stage ends) → downstream injecting that retriever's files, and, as a configuration of its own
 * (`source: agent, policy: trained`), the files the policy finds when the downstream stage serves it itself
 * (the scripted frozen agent and the real pytest harness). The tiny model answers garbage; what is asserted is
 * that the served checkpoint answered: its model name and adapter sha256 in every row, its request log, its
 * row in the reports, no server left, not even after its GPU worker was killed while it answered.
 */

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-trained-policy-it-'));
const dataDir = path.join(work, 'runs');
const modelDir = path.join(work, 'tiny-model');
const cpuQueue = uniqueTaskQueue('policy-cpu');
const gpuQueue = uniqueTaskQueue('policy-gpu');
const gpuEnv = { OMP_NUM_THREADS: '1', MKL_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false' };
let fixture: CalcFixture;
let agent: ScriptedOpenAiServer;
let stopCpuWorker: () => Promise<void>;
let gpuWorker: ChildProcess | undefined;

beforeAll(async () => {
  fixture = buildCalcFixture(work);
  execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
    cwd: repoRoot,
    stdio: 'ignore',
  });
  agent = await startScriptedOpenAiServer({ script: agentScript() });
  ({ stop: stopCpuWorker } = await startWorker(cpuQueue));
  gpuWorker = await spawnGpuWorkerProcess(gpuQueue, gpuEnv, path.join(work, 'gpu-worker.log'));
}, 300_000);

afterAll(async () => {
  if (gpuWorker) await killWorkerProcess(gpuWorker);
  await stopCpuWorker?.();
  await agent?.close();
  rmSync(work, { recursive: true, force: true });
});

function pipelineInput(runId: string, extra: { temporal?: Record<string, unknown> } = {}) {
  return {
    runId,
    dataDir,
    stages: ['catm', 'environment', 'training', 'evaluation', 'downstream'],
    inputs: { trajectories: fixture.trajectoriesPath, instances: fixture.instancesPath },
    environment: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors } },
    ...extra,
    training: {
      modelDir,
      smokeRun: true,
      recipe: 'v3',
      steps: 2,
      segmentSteps: 2,
      groupSize: 2,
      batchSize: 1,
      checkpointEvery: 1,
      limits: { maxTurns: 2, maxNewTokens: 16, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
      lora: { r: 4, alpha: 8 },
      trainer: { generator: 'hf', micro_batch_tokens: 8192 },
      gpuTaskQueue: gpuQueue,
    },
    evaluation: {
      retrievers: [
        { name: 'bm25', kind: 'bm25', k: 2 },
        { name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 'latest', concurrency: 1, timeoutMs: 60_000 },
      ],
      policyServer: { backend: 'hf', readyTimeoutMs: 300_000 },
    },
    downstream: {
      configurations: [
        { name: 'baseline', source: 'none' },
        { name: 'trained', source: 'predictions' },
        { name: 'trained-agent', source: 'agent', policy: 'trained', checkpoint: 'latest', concurrency: 1, timeoutMs: 60_000 },
      ],
      baseline: 'baseline',
      agent: { kind: 'builtin', baseUrl: agent.baseUrl, model: 'frozen-coder', maxRounds: 10, maxAttempts: 1 },
      harness: { kind: 'local', interpreter: pythonWithPytest(), testRunner: 'pytest', timeoutMs: 120_000 },
    },
  };
}

const servedDir = (runId: string, step: number) => path.join(dataDir, runId, 'policy-servers', `step-${String(step).padStart(8, '0')}`);
const adapterSha = (runId: string, step: number) =>
  createHash('sha256')
    .update(
      readFileSync(
        path.join(
          dataDir,
          runId,
          'training',
          'trainer',
          'checkpoints',
          `step-${String(step).padStart(8, '0')}`,
          'adapter_model.safetensors',
        ),
      ),
    )
    .digest('hex');
const requestLog = (runId: string, step: number) =>
  readFileSync(path.join(servedDir(runId, step), 'requests.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { model: string; step: number; adapterSha256: string });

/** No trainer/serve.py of this run is left: its pid record is gone and no process runs it. */
function leftoverServers(runId: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmdline.includes('trainer.serve') && cmdline.includes(path.join(dataDir, runId)) && isProcessAlive(Number(pid), null))
        found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The served checkpoint's stdout: one `listening` line per server started (every server of a checkpoint appends to it). */
const listeningPorts = (runId: string, step: number) =>
  readFileSync(path.join(servedDir(runId, step), 'server.stdout.log'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"event": "listening"'))
    .map((l) => (JSON.parse(l) as { port: number }).port);

/** The first test's pipeline: its run's checkpoints and samples serve the tests after it. */
let trainedRun: PipelineResult | null = null;

async function runPipeline(runId: string, during?: () => Promise<void>): Promise<PipelineResult> {
  const { client, close } = await testClient();
  try {
    const handle = await client.workflow.start('pipeline', {
      taskQueue: cpuQueue,
      workflowId: `${runId}/pipeline`,
      args: [pipelineInput(runId, { temporal: { activityTimeouts: { policyServer: { heartbeatMs: 5_000 } } } })],
    });
    await during?.();
    return (await handle.result()) as PipelineResult;
  } finally {
    await close();
  }
}

describe('the trained policy, served and measured by the pipeline', () => {
  it('evaluates the checkpoint its own training stage wrote, and injects its files downstream', async () => {
    const runId = 'policy-it';
    const result = await runPipeline(runId);
    expect(result.outcomes.map((o) => `${o.stage}:${o.status}${o.reason ? ` ${o.reason}` : ''}`)).toEqual([
      'catm:completed',
      'environment:completed',
      'training:completed',
      'evaluation:completed',
      'downstream:completed',
    ]);
    trainedRun = result;
    const step = result.training!.step;
    expect(step).toBe(2);
    const sha = adapterSha(runId, step);
    const model = `${runId}/step-00000002`;

    // Every prediction of the trained retriever names the checkpoint that answered; BM25's name none.
    const predictions = await readParquetObjects(result.evaluation!.predictions.uri);
    const trained = predictions.filter((p) => p.retriever === 'trained');
    expect(trained).toHaveLength(3);
    for (const row of trained) {
      expect(row).toMatchObject({
        kind: 'agent',
        servedModel: model,
        checkpointStep: 2,
        adapterSha256: sha,
        baseModel: modelDir,
        error: null,
      });
      expect(row.turns as number).toBeGreaterThanOrEqual(1);
    }
    for (const row of predictions.filter((p) => p.retriever === 'bm25')) expect(row.adapterSha256).toBeNull();

    // The server's own log: the requests came to this checkpoint, one per turn of the evaluation's episodes and of
    // the downstream stage's (its `agent` configuration asked the same checkpoint, served again for that stage).
    const requests = requestLog(runId, step);
    for (const request of requests) expect(request).toMatchObject({ model, step: 2, adapterSha256: sha });
    const plan = JSON.parse(readFileSync(result.downstream!.plan.uri, 'utf8')) as {
      configurations: { name: string; source: string; predictionsFrom: { uri: string } | null }[];
    };
    const agentSource = plan.configurations.find((c) => c.name === 'trained-agent')!;
    expect(agentSource.source).toBe('agent');
    const found = await readParquetObjects(agentSource.predictionsFrom!.uri);
    expect(found).toHaveLength(3);
    for (const row of found) {
      expect(row).toMatchObject({
        kind: 'agent',
        servedModel: model,
        checkpointStep: 2,
        adapterSha256: sha,
        baseModel: modelDir,
        error: null,
      });
      expect(row.turns as number).toBeGreaterThanOrEqual(1);
    }
    const turns = (rows: Record<string, unknown>[]) => rows.reduce((sum, r) => sum + (r.turns as number), 0);
    expect(requests.length).toBe(turns(trained) + turns(found));
    // Two servers, one per stage, each on a port of its own choosing.
    expect(listeningPorts(runId, step)).toHaveLength(2);

    // The reports: the trained row beside BM25 with intervals, and the checkpoint named.
    const summary = result.evaluation!.summaryValues;
    expect(summary.retrievers.map((r) => [r.name, r.kind, r.instances])).toEqual([
      ['bm25', 'bm25', 3],
      ['trained', 'agent', 3],
    ]);
    expect(summary.servedPolicies).toEqual([
      expect.objectContaining({
        retriever: 'trained',
        runId,
        step: 2,
        adapterSha256: sha,
        model,
        backend: 'hf',
        answerFormat: 'codegrep',
        maxTurns: 2,
      }),
    ]);
    expect(readFileSync(result.evaluation!.report.markdown, 'utf8')).toContain(`adapter sha256 \`${sha}\``);
    const downstreamReport = readFileSync(result.downstream!.reportMarkdown, 'utf8');
    expect(downstreamReport).toContain(`the trained policy ${model} (base model ${modelDir}, step 2, adapter sha256 ${sha})`);
    expect(result.downstream!.pairs).toBe(9);
    // Each downstream run's row names the checkpoint that chose its injected files; the baseline's name none.
    const runs = await readParquetObjects(result.downstream!.runs.uri);
    for (const configuration of ['trained', 'trained-agent'])
      expect(
        runs.filter((r) => r.configuration === configuration).map((r) => [r.servedModel, r.baseModel, r.checkpointStep, r.adapterSha256]),
      ).toEqual(Array.from({ length: 3 }, () => [model, modelDir, 2, sha]));
    // … and so does each run record.
    const recordsDir = path.join(dataDir, runId, 'downstream', 'runs', 'trained-agent');
    const records = readdirSync(recordsDir).filter((f) => f.endsWith('.json') && !/\.(manifest|trajectory)\.json$/.test(f));
    expect(records).toHaveLength(3);
    for (const file of records) {
      const record = JSON.parse(readFileSync(path.join(recordsDir, file), 'utf8')) as { row: Record<string, unknown> };
      expect(record.row).toMatchObject({ servedModel: model, baseModel: modelDir, checkpointStep: 2, adapterSha256: sha });
    }
    expect(downstreamReport).toContain('trained-agent: files found by the served policy, from');
    expect(runs.filter((r) => r.configuration === 'baseline').map((r) => r.adapterSha256)).toEqual([null, null, null]);

    // The stage ended: its server is gone.
    expect(existsSync(path.join(servedDir(runId, step), 'server.pid.json'))).toBe(false);
    expect(leftoverServers(runId)).toEqual([]);
  }, 1_200_000);

  it('reaps the server a killed GPU worker left answering, once the evaluation finished against it', async () => {
    // The served run is the first test's (its checkpoint 2); this evaluation is a run of its own.
    expect(trainedRun, "needs the first test's trained run").not.toBeNull();
    const served = 'policy-it';
    const runId = 'policy-orphan';
    const requestsBefore = requestLog(served, 2).length;
    const listeningBefore = listeningPorts(served, 2).length;
    const { client, close } = await testClient();
    let result: { predictions: { uri: string } };
    try {
      const handle = await client.workflow.start('evaluation', {
        taskQueue: cpuQueue,
        workflowId: `${runId}/evaluation`,
        args: [
          {
            ...pipelineInput(runId, {
              // Longer than the evaluation takes after the kill: the lost attempt is not retried (a retry would reap
              // the server itself) before the shards finished against the orphan and the stage cancelled it.
              temporal: { activityTimeouts: { policyServer: { heartbeatMs: 90_000 } } },
            }),
            stages: ['evaluation'],
            evaluation: {
              retrievers: [{ name: 'trained', kind: 'agent', policy: { run: served, checkpoint: 2 }, concurrency: 1, timeoutMs: 60_000 }],
              policyServer: { backend: 'hf', readyTimeoutMs: 300_000 },
            },
            artifacts: { samples: trainedRun!.environment!.samples },
          },
        ],
      });
      // The server answered its first request: SIGKILL the GPU worker that started it (its process group; the
      // server runs in a group of its own and answers on), then start a new GPU worker on the same queue.
      const deadline = Date.now() + 600_000;
      while (requestLog(served, 2).length === requestsBefore) {
        if (Date.now() > deadline) throw new Error('the policy server never answered');
        await new Promise((r) => setTimeout(r, 50));
      }
      await killWorkerProcess(gpuWorker!);
      gpuWorker = await spawnGpuWorkerProcess(gpuQueue, gpuEnv, path.join(work, 'gpu-worker.log'));
      result = (await handle.result()) as { predictions: { uri: string } };
    } finally {
      await close();
    }
    // One server for this evaluation, never restarted: the shards finished against the one the killed worker left.
    expect(listeningPorts(served, 2).length).toBe(listeningBefore + 1);
    const trained = (await readParquetObjects(result.predictions.uri)).filter((p) => p.retriever === 'trained');
    expect(trained).toHaveLength(3);
    for (const row of trained)
      expect(row).toMatchObject({ servedModel: `${served}/step-00000002`, adapterSha256: adapterSha(served, 2), error: null });
    // … and once the evaluation ended, nothing of it is left.
    expect(existsSync(path.join(servedDir(served, 2), 'server.pid.json'))).toBe(false);
    expect(leftoverServers(served)).toEqual([]);
  }, 1_200_000);

  it('resumes when the server is killed mid-evaluation: a new server on the same URL, and no orphan left', async () => {
    const runId = 'policy-kill';
    const pidFile = path.join(servedDir(runId, 2), 'server.pid.json');
    let killed: number | null = null;
    const result = await runPipeline(runId, async () => {
      // As soon as the first server listens (the evaluation's shards are starting), kill its whole process group.
      const deadline = Date.now() + 900_000;
      const stdout = path.join(servedDir(runId, 2), 'server.stdout.log');
      while (Date.now() < deadline) {
        if (existsSync(pidFile) && existsSync(stdout) && readFileSync(stdout, 'utf8').includes('"event": "listening"')) {
          killed = (JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid;
          process.kill(-killed, 'SIGKILL');
          return;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error('the policy server never listened');
    });
    expect(killed).not.toBeNull();
    expect(result.outcomes.map((o) => `${o.stage}:${o.status}${o.reason ? ` ${o.reason}` : ''}`)).toEqual([
      'catm:completed',
      'environment:completed',
      'training:completed',
      'evaluation:completed',
      'downstream:completed',
    ]);
    // A second server came up for the evaluation (two `listening` lines in the same stdout file: the same port, the
    // same URL); the last line is the downstream stage's own server (its `agent` configuration).
    const evaluationServers = listeningPorts(runId, 2).slice(0, -1);
    expect(evaluationServers.length).toBeGreaterThanOrEqual(2);
    expect(new Set(evaluationServers).size).toBe(1);
    const sha = adapterSha(runId, 2);
    const trained = (await readParquetObjects(result.evaluation!.predictions.uri)).filter((p) => p.retriever === 'trained');
    expect(trained).toHaveLength(3);
    for (const row of trained) expect(row).toMatchObject({ servedModel: `${runId}/step-00000002`, adapterSha256: sha });
    expect(isProcessAlive(killed!, null)).toBe(false);
    expect(existsSync(pidFile)).toBe(false);
    expect(leftoverServers(runId)).toEqual([]);
  }, 1_200_000);
});
