/**
 * `npm run bench -- learn`: learning shown on the real pipeline. Generated component repositories (the learnable
 * task of lib/learn-task) → environment (real git worktrees) → RFT from the scripted grep teacher
 * (CodeScout §4.1: sample, keep F1 = 1.0, `trainer.sft`) → GRPO from the RFT checkpoint (`init_from`) on the
 * instances RFT did not see, validated on the held-out ones → three checkpoints served by the policy server
 * (lib/policy-server, trainer.serve on the CPU) and evaluated on held-out instances from repositories no stage
 * trained on: the start (the random model), after RFT, after GRPO (every weight fine-tuned, CodeScout §4.1). One JSON line: held-out
 * file Fβ and reward (CodeGrep v3, §3.5 Eq. 8) of each, with paired bootstrap intervals (lib/stats) of the
 * differences, and the targets met or not. A tiny random Qwen3-shaped model on the CPU.
 *
 * Knobs (env): LEARN_GRPO_STEPS (80), LEARN_TRAIN_REPOS (8, 8 instances each: half the repos RFT, half GRPO),
 * LEARN_HELD_OUT_REPOS (6), LEARN_SEED (0: another draw of the task), LEARN_KEEP=1 keeps the work folder.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { portIsFree, startDevServer } from '../cli/dev-server';
import { readParquetObjects, sha256File } from '../lib/artifacts';
import { startPolicyServer } from '../lib/policy-server/policy-server';
import { checkpointWeightsFile, servedModelName, type ServedCheckpoint } from '../lib/policy-server/served-checkpoint';
import { codeGrepReward } from '../lib/rewards';
import { pairedMeans } from '../lib/stats';
import { trainingLayout } from '../lib/training/layout';
import type { EvaluationResult } from '../schemas/evaluation';
import type { RftResult } from '../schemas/rft';
import type { PipelineResult } from '../workflows/pipeline';
import { repoRoot } from '../test/support/repo-root';
import { killWorkerProcess, spawnWorkerAt } from '../test/support/worker-process';
import { LEARN_COMPONENT_WEIGHTS, LEARN_TASK_LIMITS, makeLearnTask } from '../lib/learn-task/make-task';
import { startTeacherServer } from '../lib/learn-task/teacher-server';

const started = Date.now();
const env = (name: string, fallback: number) => (process.env[name] ? Number(process.env[name]) : fallback);
const GRPO_STEPS = env('LEARN_GRPO_STEPS', 80);
const TRAIN_REPOS = env('LEARN_TRAIN_REPOS', 8);
const HELD_OUT_REPOS = env('LEARN_HELD_OUT_REPOS', 6);
// Offsets the task generator's seeds (training repositories: 1 + 2k, held out: 2 + 2k), to repeat the bench on another draw.
const TASK_SEED = env('LEARN_SEED', 0);
const INSTANCES_PER_REPO = 8;
const LIMITS = LEARN_TASK_LIMITS;
const python = path.join(repoRoot, '.venv/bin/python');

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-bench-learn-'));
const runId = 'learn';
const runDir = path.join(work, 'runs', runId);
const workers: ChildProcess[] = [];
const log = (message: string) => console.error(`[learn ${((Date.now() - started) / 1000).toFixed(0)} s] ${message}`);

async function freePort(from: number): Promise<number> {
  for (let port = from; port < from + 200; port++) if (await portIsFree(port)) return port;
  throw new Error(`no free port in ${from}..${from + 200}`);
}

/** Per held-out instance: file Fβ, and the v3 reward (Fβ_file · 1[c̄ > 0]) of the prediction. */
async function perInstance(result: EvaluationResult, gold: Map<string, string>) {
  const metrics = await readParquetObjects(result.metrics.uri);
  const predictions = new Map((await readParquetObjects(result.predictions.uri)).map((p) => [String(p.instanceId), p]));
  const fBeta = new Map<string, number>();
  const reward = new Map<string, number>();
  for (const m of metrics) {
    const id = String(m.instanceId);
    const p = predictions.get(id)!;
    fBeta.set(id, Number(m.fileFBeta));
    const file = gold.get(id)!;
    const turns = Number(p.turns ?? 0);
    reward.set(
      id,
      codeGrepReward('v3', {
        predictedFiles: (p.files as string[]) ?? [],
        predictedLineRanges: [],
        targetFiles: [file],
        patchFiles: [file],
        goldLineRanges: [],
        toolCalls: Number(p.toolCalls ?? 0),
        turns: Math.max(1, turns),
      }).total,
    );
  }
  return { fBeta, reward };
}

let closeAll = async () => undefined as void;
try {
  // ---- the task: training repos (RFT + GRPO) and held-out repos no stage trains on
  const task = await makeLearnTask({
    dir: work,
    seed: TASK_SEED,
    trainRepos: TRAIN_REPOS,
    heldOutRepos: HELD_OUT_REPOS,
    instancesPerRepo: INSTANCES_PER_REPO,
    python,
    projectRoot: repoRoot,
  });
  const { modelDir, rftIds, heldOutIds } = task;
  const trainInstances = task.training;
  const gold = new Map([...task.training, ...task.heldOut].map((i) => [i.instance_id, i.gold_file]));
  log(`${trainInstances.length} training instances (${rftIds.length} for RFT), ${heldOutIds.length} held out`);

  // ---- Temporal, the workers, the teacher
  const serverDir = path.join(work, 'temporal');
  mkdirSync(serverDir);
  const port = await freePort(19233);
  const server = await startDevServer({ dataDir: serverDir, port, ui: false });
  const address = `127.0.0.1:${port}`;
  const taskQueue = `learn-${process.pid}`;
  const gpuQueue = `learn-gpu-${process.pid}`;
  const quiet = { OMP_NUM_THREADS: '2', MKL_NUM_THREADS: '2', TOKENIZERS_PARALLELISM: 'false' };
  workers.push(await spawnWorkerAt(address, taskQueue, quiet));
  workers.push(await spawnWorkerAt(address, taskQueue, { ...quiet, CODEGREP_GPU_TASK_QUEUE: gpuQueue }, 'workers/gpu.ts'));
  for (const w of workers) {
    w.stdout?.resume();
    w.stderr?.resume();
  }
  const teacher = await startTeacherServer();
  const connection = await Connection.connect({ address });
  const client = new Client({ connection, namespace: 'codegrep' });
  closeAll = async () => {
    await teacher.close();
    await connection.close();
    for (const w of workers) await killWorkerProcess(w);
    await server.stop();
  };

  const config = {
    runId,
    dataDir: path.join(work, 'runs'),
    inputs: { trajectories: task.trajectoriesFile, instances: task.instancesFile },
    environment: { repoSource: { kind: 'mirror-dir', dir: task.mirrorDir } },
    training: {
      modelDir,
      recipe: 'v3',
      steps: GRPO_STEPS,
      segmentSteps: GRPO_STEPS,
      checkpointEvery: GRPO_STEPS / 2,
      gpuTaskQueue: gpuQueue,
      batchSize: 4,
      groupSize: 8,
      limits: LIMITS,
      lr: 3e-4,
      warmupRatio: 0,
      temperature: 1,
      topP: 1,
      klBeta: 0,
      finetune: 'full',
      trainer: { generator: 'hf', micro_batch_tokens: 8192, lr_schedule: 'constant', track_kl: false },
      validation: { instances: heldOutIds, every: GRPO_STEPS / 2 },
    },
    rft: {
      instances: rftIds,
      teacher: { baseUrl: teacher.baseUrl, model: teacher.model },
      shardSize: 8,
      sft: { finetune: 'full', lr: 3e-3, lrSchedule: 'constant', warmupRatio: 0, epochs: 40, globalBatchSize: 4 },
    },
    evaluation: { policyServer: { backend: 'hf' }, bootstrap: { samples: 1000 } },
  };
  const pipeline = (await client.workflow.execute('pipeline', {
    taskQueue,
    workflowId: `${runId}/pipeline`,
    args: [{ ...config, stages: ['catm', 'environment', 'rft', 'training'] }],
  })) as PipelineResult;
  const rft = pipeline.rft as RftResult;
  const grpo = pipeline.training!;
  log(`pipeline done: RFT kept ${rft.kept}/${rft.sampled}, ${rft.sftSteps} SFT steps; GRPO ${grpo.step} steps`);

  // ---- the three checkpoints, each served by the policy server and evaluated on the held-out instances
  const segments = path.join(trainingLayout(runDir).segments);
  const segment = readdirSync(segments).sort().at(-1)!;
  const trainerConfigPath = path.join(
    segments,
    segment,
    readdirSync(path.join(segments, segment))
      .filter((f) => f.endsWith('.config.json'))
      .sort()
      .at(-1)!,
  );
  const startDir = task.startCheckpointDir;
  const checkpoints = [
    { name: 'start', dir: startDir, step: 0 },
    { name: 'rft', dir: rft.checkpoint, step: rft.sftSteps },
    { name: 'grpo', dir: grpo.checkpoint!, step: grpo.step },
  ];
  const results: Record<string, { fBeta: Map<string, number>; reward: Map<string, number> }> = {};
  for (const c of checkpoints) {
    const served: ServedCheckpoint = {
      runId: `${runId}-${c.name}`,
      step: c.step,
      dir: c.dir,
      adapterSha256: await sha256File(checkpointWeightsFile(c.dir)!),
      servedName: servedModelName(`${runId}-${c.name}`, c.step),
      trainerConfigPath,
      baseModel: modelDir,
      trainedWith: { recipe: 'codegrep-v3', answerFormat: 'codegrep', maxTurns: LIMITS.maxTurns },
    };
    const policy = await startPolicyServer({
      checkpoint: served,
      python,
      projectRoot: repoRoot,
      backend: 'hf',
      logDir: path.join(work, 'servers', c.name),
      env: { ...process.env, ...quiet },
    });
    try {
      const evaluation = (await client.workflow.execute('evaluation', {
        taskQueue,
        workflowId: `${runId}/held-out-${c.name}`,
        args: [
          {
            ...config,
            outputLabel: `held-out-${c.name}`,
            evaluation: {
              instances: heldOutIds,
              retrievers: [
                {
                  name: c.name,
                  kind: 'agent',
                  baseUrl: policy.baseUrl,
                  model: policy.model,
                  answerFormat: 'codegrep',
                  limits: { maxTurns: LIMITS.maxTurns },
                  concurrency: 1,
                  timeoutMs: 300_000,
                },
              ],
            },
          },
        ],
      })) as EvaluationResult;
      results[c.name] = await perInstance(evaluation, gold);
      log(`${c.name}: evaluated ${results[c.name]!.fBeta.size} held-out instances`);
    } finally {
      await policy.stop('evaluated');
    }
  }

  const bootstrap = { resamples: 2000, seed: 7 };
  const compare = (a: string, b: string, what: 'fBeta' | 'reward') =>
    pairedMeans(heldOutIds, results[a]![what], results[b]![what], bootstrap);
  const mean = (name: string, what: 'fBeta' | 'reward') =>
    [...results[name]![what].values()].reduce((s, v) => s + v, 0) / heldOutIds.length;
  const figures = Object.fromEntries(
    checkpoints.map((c) => [c.name, { fileFBeta: mean(c.name, 'fBeta'), reward: mean(c.name, 'reward') }]),
  );
  const startToGrpo = compare('start', 'grpo', 'fBeta');
  const rftToGrpo = compare('rft', 'grpo', 'fBeta');
  const seconds = (Date.now() - started) / 1000;
  const targets = {
    grpoFBetaAtLeast0_5: figures.grpo!.fileFBeta >= 0.5,
    grpoAtLeast0_3AboveStart: startToGrpo.second! - startToGrpo.first! >= 0.3,
    grpoNotBelowRft: rftToGrpo.differenceInterval!.high >= 0,
    within15Minutes: seconds <= 15 * 60,
  };
  // The prior's ceiling: the held-out Fβ of a policy that always answers the training set's most common gold file.
  const trainingGoldCounts = new Map<string, number>();
  for (const i of trainInstances) trainingGoldCounts.set(i.gold_file, (trainingGoldCounts.get(i.gold_file) ?? 0) + 1);
  const mostCommonFile = [...trainingGoldCounts].sort((a, b) => b[1] - a[1])[0]![0];
  const alwaysMostCommonFBeta = task.heldOut.filter((i) => i.gold_file === mostCommonFile).length / task.heldOut.length;
  console.log(
    JSON.stringify({
      bench: 'learn',
      taskSeed: TASK_SEED,
      componentWeights: LEARN_COMPONENT_WEIGHTS,
      alwaysMostCommonFile: { file: mostCommonFile, heldOutFBeta: alwaysMostCommonFBeta },
      heldOutInstances: heldOutIds.length,
      trainingInstances: trainInstances.length,
      rftKept: rft.kept,
      rftSampled: rft.sampled,
      sftSteps: rft.sftSteps,
      grpoSteps: grpo.step,
      figures,
      differences: {
        rftMinusStart: {
          fBeta: compare('start', 'rft', 'fBeta').differenceInterval,
          reward: compare('start', 'rft', 'reward').differenceInterval,
        },
        grpoMinusRft: { fBeta: rftToGrpo.differenceInterval, reward: compare('rft', 'grpo', 'reward').differenceInterval },
        grpoMinusStart: { fBeta: startToGrpo.differenceInterval, reward: compare('start', 'grpo', 'reward').differenceInterval },
      },
      validation: grpo.validation?.rows.map((r) => ({ step: r.step, value: r.value })) ?? null,
      report: path.join(trainingLayout(runDir).report, 'report.md'),
      targets,
      seconds: Math.round(seconds),
      cores: os.cpus().length,
    }),
  );
} finally {
  await closeAll().catch(() => undefined);
  const pid = path.join(runDir, 'rft', 'sft', 'sft.pid.json');
  for (const file of [pid, trainingLayout(runDir).pidFile])
    if (existsSync(file)) {
      try {
        process.kill(-(JSON.parse(readFileSync(file, 'utf8')) as { pid: number }).pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  if (process.env.LEARN_KEEP === '1') console.error(`work folder kept: ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
