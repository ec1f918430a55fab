import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { readParquetObjects, sha256File } from '../lib/artifacts';
import { resolveConfig } from '../lib/config';
import { LEARN_TASK_LIMITS, makeLearnTask, type LearnTask } from '../lib/learn-task/make-task';
import { startTeacherServer, type TeacherServer } from '../lib/learn-task/teacher-server';
import { portIsFree } from './dev-server';
import { startPolicyServer, type RunningPolicyServer } from '../lib/policy-server/policy-server';
import { checkpointWeightsFile, servedModelName } from '../lib/policy-server/served-checkpoint';
import { pairedMeans } from '../lib/stats';
import { trainerConfig } from '../lib/training/trainer-config';
import { repoRoot } from './paths';
import { runCommand } from './run';

/**
 * `codegrep learn-demo`: the demo's training, on a task a tiny model can learn on a CPU (lib/learn-task: seeded
 * "component repos" whose issues name a function of the broken component). The pipeline runs catm → environment →
 * rft (CodeScout §4.1's warm start: samples of the grep teacher kept at F1 = 1.0, every weight fine-tuned) →
 * training (GRPO, CodeGrep v3, from the RFT checkpoint) → evaluation on held-out repositories no stage trained on,
 * with three rows: BM25, the untrained start and the trained checkpoint, each served on this machine's CPU. A toy:
 * the model learns the task's prior (one component breaks most often), not per-issue search (BENCHMARKS.md
 * "Learning shown"); `npm run bench -- learn` is the full-size run.
 */

export interface LearnDemoOptions {
  /** Where the task is generated (reused when it is already there): default runs/learn-task. */
  taskDir?: string;
  runId?: string;
  /** Where the run's artifacts go (`<dataDir>/<runId>`): default runs. */
  dataDir?: string;
}

/** The demo's size: ~3 minutes on two cores (the bench's is 8 + 8 training repositories, 80 GRPO steps). */
const TASK = { seed: 0, trainRepos: 4, heldOutRepos: 2, instancesPerRepo: 8 };
const GRPO_STEPS = 8;
/** Preferred ports, so a re-run's config is the same and its stages are cache hits; any free one otherwise. */
const TEACHER_PORT = 18_391;
const START_SERVER_PORT = 18_392;

async function preferredPort(port: number): Promise<number> {
  return (await portIsFree(port)) ? port : 0;
}

/** The task as written by an earlier run (task.json), or a fresh one. */
async function learnTask(dir: string, python: string): Promise<LearnTask> {
  const record = path.join(dir, 'task.json');
  if (existsSync(record)) {
    const task = JSON.parse(readFileSync(record, 'utf8')) as LearnTask & { size?: typeof TASK };
    if (JSON.stringify(task.size) === JSON.stringify(TASK) && existsSync(task.startCheckpointDir)) return task;
  }
  rmSync(dir, { recursive: true, force: true });
  console.log(`codegrep: generating the learnable task in ${dir} (${TASK.trainRepos + TASK.heldOutRepos} git repositories, a tiny model)…`);
  const task = await makeLearnTask({ dir, ...TASK, python, projectRoot: repoRoot });
  writeFileSync(record, JSON.stringify({ ...task, size: TASK }, null, 2));
  return task;
}

function learnConfig(task: LearnTask, runId: string, dataDir: string, python: string, teacher: TeacherServer) {
  return {
    runId,
    dataDir,
    inputs: { trajectories: task.trajectoriesFile, instances: task.instancesFile },
    // No trajectories: every instance's labels come from its gold patch; the judge has nothing to judge.
    judge: { mode: 'none' },
    environment: { repoSource: { kind: 'mirror-dir', dir: task.mirrorDir } },
    rft: {
      instances: task.rftIds,
      teacher: { baseUrl: teacher.baseUrl, model: teacher.model },
      shardSize: 8,
      // A random model needs many passes over few examples (bench/learn.ts measured these on the same task).
      sft: { finetune: 'full', lr: 3e-3, lrSchedule: 'constant', warmupRatio: 0, epochs: 40, globalBatchSize: 4 },
    },
    training: {
      modelDir: task.modelDir,
      python,
      recipe: 'v3',
      steps: GRPO_STEPS,
      segmentSteps: GRPO_STEPS,
      checkpointEvery: GRPO_STEPS,
      batchSize: 4,
      groupSize: 8,
      limits: LEARN_TASK_LIMITS,
      lr: 3e-4,
      warmupRatio: 0,
      temperature: 1,
      topP: 1,
      klBeta: 0,
      finetune: 'full',
      trainer: { generator: 'hf', micro_batch_tokens: 8192, lr_schedule: 'constant', track_kl: false },
    },
    evaluation: {
      instances: task.heldOutIds,
      policyServer: { backend: 'hf' },
      retrievers: [{ name: 'bm25', kind: 'bm25', k: 1 }] as Record<string, unknown>[],
    },
    stages: ['catm', 'environment', 'rft', 'training', 'evaluation'],
  };
}

/** The untrained model, served as an outside endpoint (it has no training run of its own to be served from). */
async function serveStart(
  task: LearnTask,
  config: ReturnType<typeof learnConfig>,
  logDir: string,
  python: string,
): Promise<RunningPolicyServer> {
  const resolved = resolveConfig(config, 'learn-demo');
  mkdirSync(logDir, { recursive: true });
  const trainerConfigPath = path.join(logDir, 'trainer-config.json');
  writeFileSync(
    trainerConfigPath,
    JSON.stringify(
      trainerConfig(resolved.training!, {
        outputDir: logDir,
        envUrl: 'http://127.0.0.1:9/unused',
        instanceIds: task.heldOutIds, // never read by the server; the trainer's config requires some
        totalSteps: GRPO_STEPS,
      }),
    ),
  );
  return startPolicyServer({
    checkpoint: {
      runId: 'start',
      step: 0,
      dir: task.startCheckpointDir,
      adapterSha256: await sha256File(checkpointWeightsFile(task.startCheckpointDir)!),
      servedName: servedModelName('start', 0),
      trainerConfigPath,
      baseModel: task.modelDir,
      trainedWith: { recipe: 'codegrep-v3', answerFormat: 'codegrep', maxTurns: LEARN_TASK_LIMITS.maxTurns },
    },
    python,
    projectRoot: repoRoot,
    backend: 'hf',
    logDir,
    port: await preferredPort(START_SERVER_PORT),
    env: { ...process.env, OMP_NUM_THREADS: '1', TOKENIZERS_PARALLELISM: 'false' },
  });
}

/** Held-out Fβ of the start and the trained checkpoint, and their paired difference (lib/stats), one line. */
async function learningLine(metricsFile: string): Promise<string | null> {
  if (!existsSync(metricsFile)) return null;
  const byRetriever = new Map<string, Map<string, number>>();
  for (const row of await readParquetObjects(metricsFile)) {
    const name = String(row.retriever);
    if (!byRetriever.has(name)) byRetriever.set(name, new Map());
    byRetriever.get(name)!.set(String(row.instanceId), Number(row.fileFBeta));
  }
  const start = byRetriever.get('start');
  const trained = byRetriever.get('trained');
  if (!start || !trained) return null;
  const ids = [...start.keys()].filter((id) => trained.has(id)).sort();
  const paired = pairedMeans(ids, start, trained, { resamples: 2000, seed: 7 });
  if (paired.first === null || paired.second === null || !paired.differenceInterval) return null;
  const d = paired.differenceInterval;
  return (
    `  Learning on the toy task: held-out Fβ start ${paired.first.toFixed(3)} → trained ${paired.second.toFixed(3)}, ` +
    `difference ${d.estimate >= 0 ? '+' : ''}${d.estimate.toFixed(3)} [${d.low.toFixed(2)}, ${d.high.toFixed(2)}] ` +
    `(paired bootstrap, 95 %, ${ids.length} instances)`
  );
}

export async function learnDemoCommand(options: LearnDemoOptions = {}): Promise<number> {
  const runId = options.runId ?? 'demo-learn';
  const dataDir = path.resolve(options.dataDir ?? path.join(repoRoot, 'runs'));
  const taskDir = path.resolve(options.taskDir ?? path.join(dataDir, 'learn-task'));
  const python = path.join(repoRoot, '.venv/bin/python');
  const task = await learnTask(taskDir, python);
  const teacher = await startTeacherServer(await preferredPort(TEACHER_PORT));
  let start: RunningPolicyServer | null = null;
  try {
    const config = learnConfig(task, runId, dataDir, python, teacher);
    start = await serveStart(task, config, path.join(taskDir, 'start-server'), python);
    config.evaluation.retrievers.push(
      {
        name: 'start',
        kind: 'agent',
        baseUrl: start.baseUrl,
        model: start.model,
        answerFormat: 'codegrep',
        limits: { maxTurns: LEARN_TASK_LIMITS.maxTurns },
        concurrency: 2,
        timeoutMs: 300_000,
      },
      { name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 'latest', concurrency: 2, timeoutMs: 300_000 },
    );
    const configFile = path.join(taskDir, 'pipeline.json');
    writeFileSync(configFile, JSON.stringify(config, null, 2) + '\n');
    const status = await runCommand({
      configFile,
      embedded: true,
      worker: true,
      detach: false,
      toyTask: `a toy task on a CPU (lib/learn-task: ${task.training.length} training and ${task.heldOutIds.length} held-out instances, a tiny random model; it learns the task's prior, not per-issue search)`,
    });
    const line = status === 0 ? await learningLine(path.join(dataDir, runId, 'evaluation', 'metrics.parquet')) : null;
    if (line) console.log(`${line}\n`);
    return status;
  } finally {
    await start?.stop('learn demo done');
    await teacher.close();
  }
}
