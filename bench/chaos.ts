/**
 * Chaos suite (BENCHMARKS.md "Chaos"): `npm run chaos [-- <stage>…] [--trials N] [--seed S]`. Per stage, two uninterrupted
 * reference runs, then N trials that each SIGKILL the worker process (its whole process group) at a random
 * moment of the run, and in every third trial (the first included) the Temporal dev server too; both are restarted and the run is
 * let finish. Every artifact of the stage's folder is compared with the reference by sha256; a file whose bytes
 * differ between the two references (by design: timestamps, durations) is compared by its rows/fields, leaving
 * out those that differ between the references. Work items are counted in the stage's main artifact (lost:
 * missing keys, duplicated: repeated keys), and the scripted endpoint's requests against the reference's
 * (redone: asked again because in flight at the kill). One JSON line per trial and one summary line per stage.
 *
 * Real parts only: the real dev server, real worker processes, real git and Parquet; the LLM endpoint is the
 * scripted one (test/support/scripted-openai-server.ts). Stages covered: catm (LLM judge), environment,
 * evaluation (BM25 and a scripted agentic retriever), downstream (the scripted frozen agent on the acme/calc
 * fixture, real pytest), training (the real trainer on the CPU with a tiny random model, a smoke run: the GPU
 * worker is killed too).
 *
 * One fault is not a kill: `trainer-ignores-sigterm` runs the training stage with a trainer that does not exit on
 * SIGTERM (the real trainer checkpoints and exits, its launcher stays, as a rank stuck in a CUDA or NCCL call
 * does) and stalls the GPU worker (SIGSTOP, then SIGCONT) past the heartbeat timeout, so the server gives the
 * segment's attempt up and the worker cancels it: the trainer gets SIGTERM, ignores it, and is killed with its
 * process group after stopGraceMs. A trial passes only if the same GPU worker process lives on and the retry
 * finishes the run with the reference's artifacts (its line says whether the force-kill happened).
 *
 * The policy-server faults (`<fault>-eval`, `<fault>-validation`; README "Serving and evaluating the trained
 * policy"): once the served checkpoint's request log (`policy-servers/step-N/requests.jsonl`) has a line, and then
 * at a seeded random moment inside the time the references' servers answered, SIGKILL the serving trainer.serve
 * (`policy-server-killed`), the GPU worker (`gpu-worker-killed`, restarted) or the Temporal dev server
 * (`temporal-killed`, restarted; the workers must ride it out). The three faults of a kind share one pair of
 * references. Beyond the usual checks a trial passes only if no trainer.serve process of the run's data dir is
 * left once the run ended; as for a kill, the fault counts only if the run was still open at its moment. Four of the six run only when named or with `--full` (FULL_ONLY).
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { portIsFree, startDevServer } from '../cli/dev-server';
import { readParquetObjects } from '../lib/artifacts';
import { isProcessAlive } from '../lib/process';
import { buildFixtureRepo } from '../test/support/fixture-repos';
import { repoRoot, sharedData } from '../test/support/repo-root';
import { reply, startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../test/support/scripted-openai-server';
import { killWorkerProcess, spawnWorkerAt } from '../test/support/worker-process';
import { agentScript, buildCalcFixture, calcDownstreamInput, pythonWithPytest } from '../test/integration/downstream-fixture';
import {
  compareSegmentSplit,
  dropKeys,
  isSegmentFile,
  parquetRows,
  stable,
  TRAINING_METRICS_SPLIT,
  withoutSegmentInputs,
  type Row,
  type SegmentSplit,
} from './chaos-compare';

interface Scenario {
  stage: string;
  /** Workflow type and input for one run; the run folder is always `<dataDir>/<runId>`. */
  workflow: string;
  input: Record<string, unknown>;
  /** Folder (relative to the run folder) whose files are the artifacts compared. */
  artifactDir: string;
  /** Main artifact (relative to the run folder) and the key of one work item in it. */
  items: { file: string; key: (row: Row) => string };
  /** Restores what the run needs in its folder (earlier stages' outputs) before each run. */
  prepare?: () => void;
  llm: ScriptedOpenAiServer | null;
  /** Everything the run writes outside its folder that must go between runs (caches of worktrees). */
  extraDirs?: string[];
  /** Files named per attempt (a trainer attempt's own stdout/stderr): left out of the comparison, by design. */
  perAttempt?: RegExp;
  /** A folder of append-only journal files named per attempt (and pid): compared as one set of lines. */
  journalDir?: string;
  /**
   * JSON fields that report the recovery itself (judgements resumed from the journal, the activity attempt that
   * wrote a run record): they differ by design after a kill. `file` matches the artifact (its manifest too).
   */
  resumeReported?: { file: RegExp; keys: string[] };
  /**
   * Files a trial may add by design, beyond the reference's: the checkpoint a SIGTERM-stopped trainer writes of
   * the step it stopped at (trainer/README.md "Checkpoints, stopping, resuming"), a step no reference stopped at.
   */
  addedByDesign?: RegExp;
  /**
   * Per-segment files whose split of the run's steps depends on timing by design (bench/chaos-compare.ts
   * SegmentSplit): compared as one table, each step once, rather than file by file.
   */
  segmentSplit?: SegmentSplit;
  /** What a trial does to the run: SIGKILL the workers (the default), or stall the GPU worker past its heartbeat timeout. */
  fault?: 'kill' | 'stall-gpu-worker' | PolicyServerFault;
  /** Scenarios of one group share their two reference runs (the same run, faulted differently). */
  referenceGroup?: string;
}

/**
 * The policy-server faults: SIGKILL the serving trainer/serve.py (its process group), the GPU worker that runs
 * `servePolicy`, or the Temporal dev server, once the server's request log shows it answering.
 */
type PolicyServerFault = 'kill-policy-server' | 'kill-gpu-worker' | 'kill-temporal';
const POLICY_SERVER_FAULTS: Record<string, PolicyServerFault> = {
  'policy-server-killed': 'kill-policy-server',
  'gpu-worker-killed': 'kill-gpu-worker',
  'temporal-killed': 'kill-temporal',
};
const isPolicyServerFault = (fault: Scenario['fault']): fault is PolicyServerFault =>
  fault === 'kill-policy-server' || fault === 'kill-gpu-worker' || fault === 'kill-temporal';

/** `<artifact>.tmp-<pid>-<hex>`: the temp file of an atomic write (lib/artifacts/atomic-write.ts) whose writer was killed. */
const TEMP_FILE = /\.tmp-\d+-[0-9a-f]{8}$/;

const args = process.argv.slice(2);
const flag = (name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const TRIALS = flag('trials', 10);
const SEED = flag('seed', 1);
const POLICY_STAGES = Object.keys(POLICY_SERVER_FAULTS).flatMap((fault) => [`${fault}-eval`, `${fault}-validation`]);
const ALL = ['catm', 'environment', 'evaluation', 'training', 'downstream', 'trainer-ignores-sigterm', ...POLICY_STAGES];
/**
 * Run only when named or with `--full`: each costs a trained checkpoint and a served tiny model on the CPU, so the
 * short run (`npm test`: `--trials 1`) keeps one eval and one validation fault (BENCHMARKS.md "Chaos").
 */
const FULL_ONLY = ['gpu-worker-killed-eval', 'temporal-killed-eval', 'policy-server-killed-validation', 'temporal-killed-validation'];
const flagValues = new Set(['--trials', '--seed'].flatMap((f) => (args.indexOf(f) >= 0 ? [args[args.indexOf(f) + 1]] : [])));
const chosen = args.filter((a) => !a.startsWith('--') && !flagValues.has(a));
for (const stage of chosen) if (!ALL.includes(stage)) throw new Error(`chaos: unknown stage "${stage}" (known: ${ALL.join(', ')})`);
const stages = chosen.length > 0 ? chosen : args.includes('--full') ? ALL : ALL.filter((stage) => !FULL_ONLY.includes(stage));

let seed = SEED >>> 0;
const random = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-chaos-'));
const dataDir = path.join(work, 'runs');
const RUN_ID = 'chaos-run';
const runDir = path.join(dataDir, RUN_ID);
const taskQueue = `chaos-${process.pid}`;

async function freePort(from: number): Promise<number> {
  for (let port = from; port < from + 500; port++) if ((await portIsFree(port)) && (await portIsFree(port + 1000))) return port;
  throw new Error('chaos: no free port');
}

// ---- the server and the worker, both killable ----------------------------------------------------------

const serverDir = path.join(work, 'temporal');
let port = 0;
let serverPid: number | null = null;
let worker: ChildProcess | null = null;
/** The GPU worker (workers/gpu.ts), started only for the training stage; killed with the CPU worker. */
let gpuWorker: ChildProcess | null = null;
const gpuTaskQueue = `chaos-gpu-${process.pid}`;
const gpuEnv = {
  OMP_NUM_THREADS: '1',
  MKL_NUM_THREADS: '1',
  TOKENIZERS_PARALLELISM: 'false',
  CODEGREP_SHUTDOWN_GRACE_MS: '2000',
  CODEGREP_GPU_TASK_QUEUE: gpuTaskQueue,
};

async function startServer(): Promise<void> {
  const server = await startDevServer({ dataDir: serverDir, port, ui: false });
  serverPid = server.pid;
}

async function killServer(): Promise<void> {
  if (serverPid === null) return;
  try {
    process.kill(-serverPid, 'SIGKILL');
  } catch {
    process.kill(serverPid, 'SIGKILL');
  }
  for (let i = 0; i < 100 && !(await portIsFree(port)); i++) await new Promise((r) => setTimeout(r, 100));
  serverPid = null;
}

const address = () => `127.0.0.1:${port}`;
async function startWorker(): Promise<void> {
  // Short heartbeats are in each scenario's input; the worker only needs the server and the queue.
  worker = await spawnWorkerAt(address(), taskQueue, { CODEGREP_SHUTDOWN_GRACE_MS: '1000' });
  worker.stdout?.resume();
  worker.stderr?.resume();
}

/** The GPU worker's output since it started: a trial counts the force-kills it logged. */
let gpuWorkerOutput = '';
async function startGpuWorker(): Promise<void> {
  gpuWorkerOutput = '';
  gpuWorker = await spawnWorkerAt(address(), taskQueue, gpuEnv, 'workers/gpu.ts');
  const keep = (chunk: Buffer) => {
    const text = chunk.toString();
    gpuWorkerOutput = (gpuWorkerOutput + text).slice(-1_000_000);
    reapsAfterScope += text.match(REAP_AFTER_SCOPE_LINE)?.length ?? 0;
  };
  gpuWorker.stdout?.on('data', keep);
  gpuWorker.stderr?.on('data', keep);
}
/** activities/policy-server-reap.ts `reapPolicyServer`: a server a lost attempt left running, stopped once its scope settled. */
const REAP_AFTER_SCOPE_LINE = /a lost attempt left running/g;
/** Servers reaped by `reapPolicyServer` since the suite started (counted across GPU worker restarts). */
let reapsAfterScope = 0;
const FORCE_KILL_LINE = /the trainer did not exit within \d+ ms of SIGTERM; killing its process group/g;
const forceKillsLogged = () => gpuWorkerOutput.match(FORCE_KILL_LINE)?.length ?? 0;
const gpuWorkerRuns = () => gpuWorker !== null && gpuWorker.exitCode === null && gpuWorker.signalCode === null;

/** A trainer orphaned by a killed GPU worker runs in its own process group; the next attempt reaps it, and so does this at the end. */
function killOrphanedTrainer(): void {
  const pidFile = path.join(runDir, 'training', 'trainer.pid.json');
  if (!existsSync(pidFile)) return;
  try {
    process.kill(-(JSON.parse(readFileSync(pidFile, 'utf8')) as { pid: number }).pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

// ---- the policy server ----------------------------------------------------------------------------------

const policyServersDir = () => path.join(runDir, 'policy-servers');
const policyServerDirs = () =>
  existsSync(policyServersDir()) ? readdirSync(policyServersDir()).map((step) => path.join(policyServersDir(), step)) : [];

/** Whether some served checkpoint's request log (trainer/serve.py, one line per completion) has a line yet. */
function policyServerAnswered(): boolean {
  return policyServerDirs().some((dir) => {
    try {
      return readFileSync(path.join(dir, 'requests.jsonl'), 'utf8').trim().length > 0;
    } catch {
      return false;
    }
  });
}

/** SIGKILLs the process group of every policy server whose pid record exists (the one serving now); returns how many. */
function killPolicyServers(): number {
  let killed = 0;
  for (const dir of policyServerDirs()) {
    try {
      process.kill(-(JSON.parse(readFileSync(path.join(dir, 'server.pid.json'), 'utf8')) as { pid: number }).pid, 'SIGKILL');
      killed += 1;
    } catch {
      // no record, or already gone
    }
  }
  return killed;
}

/** Live processes of this run's trainer/serve.py: what a finished run must not leave behind. */
function policyServerProcesses(): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (
        (cmdline.includes('trainer.serve') || cmdline.includes('trainer/serve.py')) &&
        cmdline.includes(dataDir) &&
        isProcessAlive(Number(pid), null)
      )
        found.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** Ends the orphans a trial found, so the next run starts clean (the trial has already been counted as failed). */
function killPolicyServerProcesses(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

async function withClient<T>(use: (client: Client) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      const connection = await Connection.connect({ address: address() });
      try {
        return await use(new Client({ connection, namespace: 'codegrep' }));
      } finally {
        await connection.close();
      }
    } catch (error) {
      if (attempt >= 60) throw error;
      await new Promise((r) => setTimeout(r, 1000)); // the server is being restarted
    }
  }
}

// ---- artifacts --------------------------------------------------------------------------------------------

function listFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((f) => !f.endsWith('.lock'))
    .filter((f) => {
      try {
        return readFileSync(path.join(dir, f)) !== undefined;
      } catch {
        return false; // a directory
      }
    })
    .sort();
}

const sha256 = (file: string) => createHash('sha256').update(readFileSync(file)).digest('hex');

async function contentOf(file: string): Promise<unknown> {
  if (file.endsWith('.parquet')) return parquetRows(file);
  if (file.endsWith('.json')) return JSON.parse(readFileSync(file, 'utf8'));
  if (file.endsWith('.jsonl'))
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as unknown)
      .sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
  return readFileSync(file, 'utf8').split('\n'); // a text report: compared line by line
}

interface Snapshot {
  dir: string;
  files: string[];
}

function snapshot(scenario: Scenario, label: string): Snapshot {
  const dir = path.join(work, 'snapshots', scenario.stage, label);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  cpSync(path.join(runDir, scenario.artifactDir), dir, { recursive: true });
  return { dir, files: listFiles(dir) };
}

function journalLines(snap: Snapshot, journalDir: string): unknown[] {
  return snap.files
    .filter((f) => f.startsWith(`${journalDir}/`))
    .flatMap((f) =>
      readFileSync(path.join(snap.dir, f), 'utf8')
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l) as unknown),
    )
    .sort((a, b) => JSON.stringify(stripVolatile(a)).localeCompare(JSON.stringify(stripVolatile(b))));
}

/** Journal lines carry when they were written and by which attempt; neither is part of the result. */
function stripVolatile(line: unknown): unknown {
  if (!line || typeof line !== 'object') return line;
  return Object.fromEntries(
    Object.entries(line).filter(([k]) => !/^(at|ts|time|timestamp|writtenAt|judgedAt|attempt|pid|ms|latencyMs)$/i.test(k)),
  );
}

/** For a differing table: the first rows whose fields (minus those that vary between the references) differ, field by field. */
async function fieldDiffs(trialFile: string, refAFile: string, refBFile: string): Promise<unknown[]> {
  if (!/\.(parquet|json|jsonl|md|html)$/.test(trialFile)) return [];
  const [ct, ca, cb] = await Promise.all(
    [trialFile, refAFile, refBFile].map((f) => (existsSync(f) ? contentOf(f) : Promise.resolve(null))),
  );
  const rows = (v: unknown) => (Array.isArray(v) ? v : [v]) as unknown[];
  const [t, a, b] = [rows(ct), rows(ca), rows(cb)];
  const out: unknown[] = [];
  for (let i = 0; i < Math.max(t.length, a.length) && out.length < 5; i++) {
    const [st, sa] = [stable(t[i], a[i], b[i]), stable(a[i], a[i], b[i])];
    if (JSON.stringify(st) === JSON.stringify(sa)) continue;
    if (typeof st !== 'object' || st === null) {
      out.push({ row: i, trial: st, reference: sa });
      continue;
    }
    const fields: Record<string, unknown> = {};
    for (const k of new Set([...Object.keys((st ?? {}) as Row), ...Object.keys((sa ?? {}) as Row)])) {
      const [x, y] = [((st ?? {}) as Row)[k], ((sa ?? {}) as Row)[k]];
      if (JSON.stringify(x) !== JSON.stringify(y)) fields[k] = { trial: x, reference: y };
    }
    out.push({ row: i, fields });
  }
  return out;
}

async function compare(scenario: Scenario, trial: Snapshot, refA: Snapshot, refB: Snapshot) {
  let identical = 0;
  let sameByRows = 0;
  const differing: string[] = [];
  const byDesign: string[] = [];
  const journal = scenario.journalDir;
  const resume = scenario.resumeReported;
  let journalSame: boolean | null = null;
  if (journal) {
    const [t, a] = [journalLines(trial, journal).map(stripVolatile), journalLines(refA, journal).map(stripVolatile)];
    journalSame = JSON.stringify(t) === JSON.stringify(a);
    if (!journalSame) differing.push(`${journal}/ (journal lines)`);
  }
  const differsOnlyByResume: string[] = [];
  const rowDiffs: Record<string, unknown[]> = {};
  const split = scenario.segmentSplit;
  for (const file of refA.files) {
    if (journal && file.startsWith(`${journal}/`)) continue;
    if (scenario.perAttempt?.test(file)) continue;
    if (split && isSegmentFile(split, file)) continue; // compared as one table below
    if (resume && resume.file.test(file.replace(/\.manifest\.json$/, ''))) {
      const isManifest = file.endsWith('.manifest.json');
      const mergedSplit = split && file.replace(/\.manifest\.json$/, '') === split.merged ? split : null;
      // The merged file's rows say which segment recorded each step, and its manifest lists the segments' files.
      const keys = isManifest ? ['sha256', 'bytes'] : [...resume.keys, ...(mergedSplit?.recordedAt ?? [])];
      const view = (content: unknown) => (mergedSplit && isManifest ? withoutSegmentInputs(mergedSplit, content) : content);
      const inTrial = path.join(trial.dir, file);
      if (!existsSync(inTrial)) {
        differing.push(`${file} (missing)`);
        continue;
      }
      const [ct, ca, cb] = (await Promise.all([inTrial, path.join(refA.dir, file), path.join(refB.dir, file)].map(contentOf))).map(view);
      if (JSON.stringify(stable(dropKeys(ct, keys), ca, cb)) === JSON.stringify(stable(dropKeys(ca, keys), ca, cb))) {
        if (sha256(inTrial) === sha256(path.join(refA.dir, file))) identical += 1;
        else differsOnlyByResume.push(file);
      } else {
        differing.push(file);
        rowDiffs[file] = await fieldDiffs(inTrial, path.join(refA.dir, file), path.join(refB.dir, file));
      }
      continue;
    }
    const inTrial = path.join(trial.dir, file);
    if (!existsSync(inTrial)) {
      differing.push(`${file} (missing)`);
      continue;
    }
    const [t, a, b] = [sha256(inTrial), sha256(path.join(refA.dir, file)), sha256(path.join(refB.dir, file))];
    if (t === a) {
      identical += 1;
      continue;
    }
    if (a !== b && existsSync(path.join(refB.dir, file))) {
      byDesign.push(file);
      const [ct, ca, cb] = await Promise.all([
        contentOf(inTrial),
        contentOf(path.join(refA.dir, file)),
        contentOf(path.join(refB.dir, file)),
      ]);
      if (JSON.stringify(stable(ct, ca, cb)) === JSON.stringify(stable(ca, ca, cb))) {
        sameByRows += 1;
        continue;
      }
    }
    differing.push(file);
    rowDiffs[file] = await fieldDiffs(inTrial, path.join(refA.dir, file), path.join(refB.dir, file));
  }
  let segmentSplit: { trial: string[]; reference: string[] } | null = null;
  if (split) {
    const union = await compareSegmentSplit(split, trial.dir, refA.dir, refB.dir);
    segmentSplit = { trial: union.trialSegments, reference: union.referenceSegments };
    if (!union.same) {
      differing.push(`${split.label} (union of the segments' rows)`);
      rowDiffs[split.label] = [
        ...union.rowDiffs,
        ...(union.stepsTwice.length > 0 ? [{ stepsInTwoSegments: union.stepsTwice }] : []),
        ...union.problems.map((problem) => ({ problem })),
      ];
    }
  }
  const unexpected = trial.files.filter(
    (f) =>
      !refA.files.includes(f) &&
      !(journal && f.startsWith(`${journal}/`)) &&
      !scenario.perAttempt?.test(f) &&
      !(split && isSegmentFile(split, f)),
  );
  const leftoverTemps = unexpected.filter((f) => TEMP_FILE.test(f));
  const addedByDesign = unexpected.filter((f) => !TEMP_FILE.test(f) && scenario.addedByDesign?.test(f));
  const extra = unexpected.filter((f) => !TEMP_FILE.test(f) && !addedByDesign.includes(f));
  return {
    artifacts: refA.files.length,
    identical,
    sameByRows,
    differsOnlyByResume,
    byDesign,
    differing,
    rowDiffs,
    extra,
    addedByDesign,
    leftoverTemps,
    journalSame,
    ...(segmentSplit ? { segmentSplit } : {}),
  };
}

async function itemCounts(scenario: Scenario, reference: Set<string> | null) {
  const rows = await readParquetObjects(path.join(runDir, scenario.items.file));
  const keys = rows.map(scenario.items.key);
  const unique = new Set(keys);
  const lost = reference ? [...reference].filter((k) => !unique.has(k)).length : 0;
  // Rows that say how they were made (a worktree `created`, `reused` or `repaired`): counted per status.
  const byStatus: Record<string, number> = {};
  for (const row of rows) if (typeof row.status === 'string') byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
  return { items: unique.size, duplicated: keys.length - unique.size, lost, keys: unique, byStatus };
}

// ---- one run ----------------------------------------------------------------------------------------------

function resetRun(scenario: Scenario): void {
  killOrphanedTrainer();
  rmSync(runDir, { recursive: true, force: true });
  for (const dir of scenario.extraDirs ?? []) rmSync(dir, { recursive: true, force: true });
  scenario.prepare?.();
}

let runNo = 0;
async function runOnce(scenario: Scenario, chaos: { killAtMs: number; killServer: boolean } | null) {
  resetRun(scenario);
  const requestsBefore = scenario.llm?.requests.length ?? 0;
  const workflowId = `${RUN_ID}/${scenario.stage}-${++runNo}`;
  const started = Date.now();
  await withClient((client) => client.workflow.start(scenario.workflow, { taskQueue, workflowId, args: [scenario.input] }));
  let kills = 0;
  let serverKills = 0;
  const stalled = { stalls: 0, forceKills: 0, gpuWorkerSurvived: true };
  const served = { firstAnswerMs: null as number | null, faults: 0, restartedWorkers: 0, reapedAfterScope: 0 };
  const reapsBefore = reapsAfterScope;
  const isRunning = () => withClient(async (client) => (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING');
  if (isPolicyServerFault(scenario.fault)) {
    // Every run (the references too) notes when the server first answered: the trials' kill window starts there.
    for (;;) {
      if (policyServerAnswered()) {
        served.firstAnswerMs = Date.now() - started;
        break;
      }
      if (!(await isRunning())) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  if (chaos && isPolicyServerFault(scenario.fault) && served.firstAnswerMs !== null) {
    await new Promise((r) => setTimeout(r, chaos.killAtMs));
    if (await isRunning()) {
      if (scenario.fault === 'kill-policy-server') served.faults += killPolicyServers() > 0 ? 1 : 0;
      if (scenario.fault === 'kill-gpu-worker') {
        await killWorkerProcess(gpuWorker!);
        kills += 1;
        served.faults += 1;
        await startGpuWorker();
      }
      if (scenario.fault === 'kill-temporal') {
        await killServer();
        serverKills += 1;
        served.faults += 1;
        await startServer();
      }
    }
    // The workers must ride out the fault themselves; one that died is replaced (and counted) so the run can end.
    while (await isRunning()) {
      if (worker!.exitCode !== null || worker!.signalCode !== null) {
        served.restartedWorkers += 1;
        await startWorker();
      }
      if (!gpuWorkerRuns() && scenario.fault !== 'kill-gpu-worker') {
        served.restartedWorkers += 1;
        await startGpuWorker();
      }
      await new Promise((r) => setTimeout(r, 1_000));
    }
  } else if (chaos && scenario.fault === 'stall-gpu-worker') {
    const worker = gpuWorker!;
    const forceKillsBefore = forceKillsLogged();
    await new Promise((r) => setTimeout(r, chaos.killAtMs));
    const closed = await withClient(async (client) => (await client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING');
    if (!closed) {
      // Past the segment's heartbeat timeout (4 s in its input): the server gives the attempt up.
      process.kill(worker.pid!, 'SIGSTOP');
      await new Promise((r) => setTimeout(r, STALL_MS));
      process.kill(worker.pid!, 'SIGCONT');
      stalled.stalls += 1;
    }
    // A worker that died (the failure this fault looks for) is replaced, so the run can still end and be counted.
    for (;;) {
      const running = await withClient(
        async (client) => (await client.workflow.getHandle(workflowId).describe()).status.name === 'RUNNING',
      );
      if (!running) break;
      if (!gpuWorkerRuns()) {
        stalled.gpuWorkerSurvived = false;
        await startGpuWorker();
      }
      await new Promise((r) => setTimeout(r, 1_000));
    }
    stalled.gpuWorkerSurvived &&= gpuWorker === worker && gpuWorkerRuns();
    stalled.forceKills = gpuWorker === worker ? forceKillsLogged() - forceKillsBefore : 0;
  } else if (chaos) {
    await new Promise((r) => setTimeout(r, chaos.killAtMs));
    const closed = await withClient(async (client) => (await client.workflow.getHandle(workflowId).describe()).status.name !== 'RUNNING');
    if (!closed) {
      await killWorkerProcess(worker!);
      if (gpuWorker) await killWorkerProcess(gpuWorker);
      kills += 1;
      if (chaos.killServer) {
        await killServer();
        serverKills += 1;
        await startServer();
      }
      await startWorker();
      if (gpuWorker) await startGpuWorker();
    }
  }
  const status = await withClient(async (client) => {
    const handle = client.workflow.getHandle(workflowId);
    try {
      await handle.result();
    } catch {
      // the status below says it
    }
    return (await handle.describe()).status.name;
  });
  // A finished run has stopped its servers; a grace second for the kernel to reap the group just stopped.
  let orphans = policyServerProcesses();
  for (let i = 0; i < 3 && orphans.length > 0; i++) {
    await new Promise((r) => setTimeout(r, 1_000));
    orphans = policyServerProcesses();
  }
  killPolicyServerProcesses(orphans);
  served.reapedAfterScope = reapsAfterScope - reapsBefore;
  return {
    orphans: orphans.length,
    ...(isPolicyServerFault(scenario.fault) ? { served } : {}),
    workflowId,
    status,
    ms: Date.now() - started,
    kills,
    serverKills,
    ...(scenario.fault === 'stall-gpu-worker' ? stalled : {}),
    requests: (scenario.llm?.requests.length ?? 0) - requestsBefore,
  };
}
const STALL_MS = 9_000;

// ---- scenarios --------------------------------------------------------------------------------------------

async function scenarios(): Promise<Scenario[]> {
  const out: Scenario[] = [];
  const fixtureInstances = buildFixtureRepo(work, path.join(work, 'mirrors'));
  const instancesPath = path.join(work, 'instances.jsonl');
  writeFileSync(instancesPath, fixtureInstances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(path.join(work, 'empty.jsonl'), '');
  const base = { runId: RUN_ID, dataDir, recipe: 'v3' };
  const worktreeDirs = { cacheDir: path.join(work, 'cache', 'repos'), worktreesDir: path.join(work, 'cache', 'worktrees') };

  if (stages.includes('catm')) {
    const llm = await startScriptedOpenAiServer({
      latencyMs: 250,
      script: (body) => reply.text(JSON.stringify(body.messages).length % 3 === 0 ? 'NOT_RELEVANT' : 'RELEVANT'),
    });
    out.push({
      stage: 'catm',
      workflow: 'catm',
      input: {
        ...base,
        stages: ['catm'],
        inputs: {
          trajectories: path.join(sharedData, 'openhands_trajectories.sample.jsonl'),
          instances: path.join(sharedData, 'swebench_verified.jsonl'),
        },
        judge: { mode: 'llm', baseUrl: llm.baseUrl, model: 'chaos-judge', concurrency: 4 },
        temporal: { activityTimeouts: { judge: { heartbeatMs: 3_000 }, mine: { heartbeatMs: 3_000 }, weight: { heartbeatMs: 3_000 } } },
      },
      artifactDir: 'catm',
      items: { file: 'catm/judgements.parquet', key: (r) => `${String(r.trajectoryId)}\u0000${String(r.path)}` },
      llm,
      journalDir: 'judge-shards',
      resumeReported: { file: /^summary\.json$/, keys: ['judge.resumed'] },
    });
  }
  const environmentInput = {
    ...base,
    stages: ['catm', 'environment'],
    inputs: { trajectories: path.join(work, 'empty.jsonl'), instances: instancesPath },
    environment: { repoSource: { kind: 'mirror-dir', dir: path.join(work, 'mirrors') }, ...worktreeDirs },
    temporal: { activityTimeouts: { worktrees: { heartbeatMs: 3_000 } } },
  };
  if (stages.includes('environment')) {
    out.push({
      stage: 'environment',
      workflow: 'pipeline',
      input: environmentInput,
      artifactDir: 'environment',
      items: { file: 'environment/worktrees.parquet', key: (r) => `${String(r.repo)}@${String(r.commit)}` },
      llm: null,
      // A worktree made before the kill is `reused` by the retry, a half-made one `repaired` (lib/worktrees/worktree.ts):
      // the row reports the recovery; repo, commit, path, bytes and error must still match the reference.
      resumeReported: { file: /^worktrees\.parquet$/, keys: ['status'] },
      extraDirs: [path.join(work, 'cache')],
    });
  }
  if (stages.includes('evaluation')) {
    // Every episode: a grep, then an answer (as in test/integration/evaluation-kill.test.ts).
    const llm = await startScriptedOpenAiServer({
      latencyMs: 150,
      script: (body) =>
        (body.messages as { role: string }[]).some((m) => m.role === 'assistant')
          ? reply.text('<answer>{"files": ["widgets/gears.py"]}</answer>')
          : reply.toolCalls([{ name: 'grep', arguments: { pattern: 'def ' } }]),
    });
    const saved = path.join(work, 'environment-for-evaluation');
    out.push({
      stage: 'evaluation',
      workflow: 'evaluation',
      input: {
        ...environmentInput,
        stages: ['evaluation'],
        evaluation: {
          retrievers: [
            { name: 'bm25', kind: 'bm25', k: 2 },
            { name: 'agent', kind: 'agent', baseUrl: llm.baseUrl, model: 'chaos-agent', answerFormat: 'codegrep' },
          ],
          shardSize: 1,
          maxConcurrentShards: 2,
          bootstrap: { samples: 100 },
        },
        temporal: { activityTimeouts: { evaluation: { heartbeatMs: 3_000 } } },
      },
      artifactDir: 'evaluation',
      items: { file: 'evaluation/metrics.parquet', key: (r) => `${String(r.retriever)}\u0000${String(r.instanceId)}` },
      llm,
      // The environment stage's outputs, made once (uninterrupted, by `setup`) and restored before every run.
      prepare: () => {
        if (!existsSync(saved)) throw new Error('chaos: the evaluation scenario needs its environment run first');
        cpSync(saved, runDir, { recursive: true });
      },
    });
    (out.at(-1) as Scenario & { setup?: () => Promise<void> }).setup = async () => {
      rmSync(runDir, { recursive: true, force: true });
      const id = `${RUN_ID}/setup-environment`;
      await withClient((client) => client.workflow.execute('pipeline', { taskQueue, workflowId: id, args: [environmentInput] }));
      mkdirSync(saved, { recursive: true });
      for (const dir of ['catm', 'environment']) cpSync(path.join(runDir, dir), path.join(saved, dir), { recursive: true });
    };
  }
  const trainingStages = stages.filter((stage) => stage === 'training' || stage === 'trainer-ignores-sigterm');
  const policyStages = stages.filter((stage) => POLICY_STAGES.includes(stage));
  if (trainingStages.length > 0 || policyStages.length > 0) {
    // As test/integration/training.test.ts: the real trainer on the CPU, a tiny randomly initialised Qwen3-shaped
    // model (a smoke run: it cannot learn), group 2, one prompt per step, a checkpoint every step.
    const modelDir = path.join(work, 'tiny-model');
    execFileSync(path.join(repoRoot, '.venv/bin/python'), ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny'], {
      cwd: repoRoot,
      stdio: 'ignore',
    });
    const saved = path.join(work, 'environment-for-training');
    // The trainer of `trainer-ignores-sigterm`: the real one, under a launcher that, once SIGTERM came, outlives the
    // trainer's own exit and ignores every further SIGTERM (a rank stuck in a CUDA or NCCL call); only SIGKILL ends it.
    const stubbornPython = path.join(work, 'stubborn-python.sh');
    writeFileSync(
      stubbornPython,
      [
        '#!/bin/sh',
        'stuck=',
        "trap 'stuck=1' TERM",
        `'${path.join(repoRoot, '.venv/bin/python')}' "$@"`,
        'code=$?',
        'if [ -n "$stuck" ]; then',
        "  trap '' TERM",
        '  echo "stubborn trainer: ignoring SIGTERM" >&2',
        '  while :; do sleep 1; done',
        'fi',
        'exit $code',
        '',
      ].join('\n'),
      { mode: 0o755 },
    );
    const trainingInput = {
      ...environmentInput,
      stages: ['training'],
      artifacts: { samples: null as unknown }, // set by setup: the environment stage's samples
      temporal: { activityTimeouts: { training: { heartbeatMs: 4_000 } } },
      training: {
        modelDir,
        smokeRun: true,
        recipe: 'v3',
        steps: 4,
        segmentSteps: 4,
        groupSize: 2,
        batchSize: 1,
        checkpointEvery: 1,
        keepCheckpoints: 20,
        limits: { maxTurns: 1, maxNewTokens: 8, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
        lora: { r: 4, alpha: 8 },
        lr: 1e-3,
        warmupRatio: 0,
        trainer: { generator: 'hf', micro_batch_tokens: 8192 },
        gpuTaskQueue,
        stopGraceMs: 20_000,
        progressEveryMs: 300,
      },
    };
    let environmentMade = false;
    const makeEnvironment = async () => {
      if (environmentMade) return;
      rmSync(runDir, { recursive: true, force: true });
      const result = (await withClient((client) =>
        client.workflow.execute('pipeline', {
          taskQueue,
          workflowId: `${RUN_ID}/setup-training-environment`,
          args: [environmentInput],
        }),
      )) as { environment: { samples: unknown } };
      trainingInput.artifacts.samples = result.environment.samples;
      mkdirSync(saved, { recursive: true });
      for (const dir of ['catm', 'environment']) cpSync(path.join(runDir, dir), path.join(saved, dir), { recursive: true });
      environmentMade = true;
    };
    for (const stage of trainingStages) {
      const stubborn = stage === 'trainer-ignores-sigterm';
      const scenario: Scenario & { setup?: () => Promise<void> } = {
        stage,
        workflow: 'training',
        input: stubborn
          ? { ...trainingInput, training: { ...trainingInput.training, python: stubbornPython, stopGraceMs: 3_000 } }
          : trainingInput,
        artifactDir: 'training',
        items: { file: 'training/metrics.parquet', key: (r) => String(r.step) },
        llm: null,
        // Each trainer attempt's own stdout/stderr (segments/segment-<n>/attempt-<m>.*): a kill adds an attempt.
        perAttempt: /^segments\//,
        // Every metrics row names the trainer attempt that recorded its step (> 1 for the steps redone after the kill)
        // and the line of that attempt's stdout it came from: both say where the row came from, not what it says.
        resumeReported: { file: /^metrics(\/segment-\d+)?\.parquet$/, keys: ['attempt', 'line'] },
        prepare: () => {
          if (!existsSync(saved)) throw new Error('chaos: the training scenario needs its environment run first');
          cpSync(saved, runDir, { recursive: true });
        },
        ...(stubborn ? { fault: 'stall-gpu-worker' as const, addedByDesign: /^trainer\/checkpoints\/step-\d+\// } : {}),
      };
      scenario.setup = async () => {
        await makeEnvironment();
        (scenario.input.artifacts as Record<string, unknown>).samples = trainingInput.artifacts.samples;
        if (!gpuWorker) await startGpuWorker();
      };
      out.push(scenario);
    }
    out.push(...policyServerScenarios(policyStages, { trainingInput, saved, makeEnvironment }));
  }
  if (stages.includes('downstream')) {
    // The downstream integration tests' world (test/integration/downstream-fixture.ts): acme/calc with three
    // bugs, two configurations (no injection, oracle files), so 6 (configuration, instance) pairs, one at a time.
    const calc = buildCalcFixture(path.join(work, 'downstream-fixture'));
    const llm = await startScriptedOpenAiServer({ script: agentScript(150) });
    out.push({
      stage: 'downstream',
      workflow: 'downstream',
      input: calcDownstreamInput({
        runId: RUN_ID,
        dataDir,
        fixture: calc,
        baseUrl: llm.baseUrl,
        python: pythonWithPytest(),
        model: 'chaos-coder',
        concurrency: 1,
        heartbeatMs: 3_000,
      }),
      artifactDir: 'downstream',
      items: { file: 'downstream/runs.parquet', key: (r) => `${String(r.configuration)}/${String(r.instanceId)}` },
      llm,
      // A run record redone after the kill was written by a later attempt of its activity, and took its own time:
      // its duration is left out too (two references can agree on it to the millisecond by chance, which made a
      // redone run's duration look like a difference).
      resumeReported: { file: /^runs\/[^/]+\/[^/]+\.json$/, keys: ['attempt', 'durationMs'] },
    });
  }
  return out;
}

/**
 * The trained policy served during an evaluation and during a validation (README "Serving and evaluating the
 * trained policy"), each under three faults sharing one pair of references. Eval: the evaluation stage alone with
 * `policy: trained, checkpoint: latest` over a trained run's folder (trained once, uninterrupted, by setup); the
 * work items are its prediction rows, one per (retriever, instance). Validation: 2 training steps validated after
 * each on the held-out instance (a child evaluation per checkpoint, each its own server); the work items are
 * `validation.parquet`'s rows, one per checkpoint step.
 */
function policyServerScenarios(
  policyStages: string[],
  training: {
    trainingInput: Record<string, unknown> & { training: Record<string, unknown>; artifacts: { samples: unknown } };
    saved: string;
    makeEnvironment: () => Promise<void>;
  },
): Scenario[] {
  const { trainingInput, saved, makeEnvironment } = training;
  const policyTimeouts = { policyServer: { heartbeatMs: 5_000 }, evaluation: { heartbeatMs: 5_000 }, training: { heartbeatMs: 4_000 } };
  const policyServer = { backend: 'hf', gpuTaskQueue, readyTimeoutMs: 300_000 };
  const servedTraining = {
    ...trainingInput.training,
    steps: 2,
    segmentSteps: 2,
    limits: { maxTurns: 2, maxNewTokens: 16, maxNewTokensPerTurn: 8, maxSeqLen: 4000 },
  };
  const trained = path.join(work, 'trained-for-evaluation');
  const out: Scenario[] = [];
  for (const stage of policyStages) {
    const fault = POLICY_SERVER_FAULTS[stage.replace(/-(eval|validation)$/, '')]!;
    if (stage.endsWith('-eval')) {
      const scenario: Scenario & { setup?: () => Promise<void> } = {
        stage,
        referenceGroup: 'trained-policy-eval',
        workflow: 'evaluation',
        input: {
          ...trainingInput,
          stages: ['evaluation'],
          training: servedTraining,
          evaluation: {
            retrievers: [{ name: 'trained', kind: 'agent', policy: 'trained', checkpoint: 'latest', concurrency: 1, timeoutMs: 60_000 }],
            shardSize: 1,
            maxConcurrentShards: 1,
            bootstrap: { samples: 100 },
            policyServer,
          },
          temporal: { activityTimeouts: policyTimeouts },
        },
        artifactDir: 'evaluation',
        items: { file: 'evaluation/predictions.parquet', key: (r) => `${String(r.retriever)}\u0000${String(r.instanceId)}` },
        llm: null,
        fault,
        prepare: () => {
          if (!existsSync(trained)) throw new Error('chaos: the trained-policy scenarios need their trained run first');
          cpSync(trained, runDir, { recursive: true });
        },
      };
      scenario.setup = async () => {
        if (!gpuWorker) await startGpuWorker(); // trains the checkpoint, then serves it
        if (existsSync(trained)) return;
        await makeEnvironment();
        rmSync(runDir, { recursive: true, force: true });
        cpSync(saved, runDir, { recursive: true });
        await withClient((client) =>
          client.workflow.execute('training', {
            taskQueue,
            workflowId: `${RUN_ID}/setup-trained-policy`,
            args: [{ ...trainingInput, training: servedTraining }],
          }),
        );
        mkdirSync(trained, { recursive: true });
        for (const dir of ['catm', 'environment', 'training']) cpSync(path.join(runDir, dir), path.join(trained, dir), { recursive: true });
      };
      out.push(scenario);
    } else {
      const scenario: Scenario & { setup?: () => Promise<void> } = {
        stage,
        referenceGroup: 'trained-policy-validation',
        workflow: 'training',
        input: {
          ...trainingInput,
          training: { ...servedTraining, validation: { instances: ['acme__widgets-2'], every: 1, metric: 'fileF1' } },
          evaluation: { policyServer },
          temporal: { activityTimeouts: policyTimeouts },
        },
        artifactDir: 'training',
        items: { file: 'training/validation.parquet', key: (r) => String(r.step) },
        llm: null,
        fault,
        perAttempt: /^segments\//,
        resumeReported: { file: /^metrics(\/segment-\d+)?\.parquet$/, keys: ['attempt', 'line'] },
        // Validated every step with segments of 2: a segment whose trainer ran past its target step before SIGTERM
        // landed holds both steps, in the references as in a trial (bench/chaos-compare.ts SegmentSplit).
        segmentSplit: TRAINING_METRICS_SPLIT,
        prepare: () => {
          if (!existsSync(saved)) throw new Error('chaos: the validation scenarios need their environment run first');
          cpSync(saved, runDir, { recursive: true });
        },
      };
      scenario.setup = async () => {
        await makeEnvironment();
        (scenario.input.artifacts as Record<string, unknown>).samples = trainingInput.artifacts.samples;
        if (!gpuWorker) await startGpuWorker();
      };
      out.push(scenario);
    }
  }
  return out;
}

// ---- main -------------------------------------------------------------------------------------------------

type RunResult = Awaited<ReturnType<typeof runOnce>>;
interface References {
  refRunA: RunResult;
  refA: Snapshot;
  refItems: Awaited<ReturnType<typeof itemCounts>>;
  refRunB: RunResult;
  refB: Snapshot;
  byDesign: string[];
}
const sharedReferences = new Map<string, References>();

/** Two uninterrupted runs; their snapshots are named after the reference group when the scenario shares one. */
async function referenceRuns(scenario: Scenario): Promise<References> {
  const named = { ...scenario, stage: scenario.referenceGroup ?? scenario.stage };
  const refRunA = await runOnce(scenario, null);
  const refA = snapshot(named, 'reference-a');
  const refItems = await itemCounts(scenario, null);
  const refRunB = await runOnce(scenario, null);
  const refB = snapshot(named, 'reference-b');
  const byDesign = refA.files.filter(
    (f) => existsSync(path.join(refB.dir, f)) && sha256(path.join(refA.dir, f)) !== sha256(path.join(refB.dir, f)),
  );
  return { refRunA, refA, refItems, refRunB, refB, byDesign };
}

/** The kill moment: inside the run as a whole, or, for a policy-server fault, inside the time the server answered. */
function killMoment(refRunA: RunResult, refRunB: RunResult): number {
  const answering = [refRunA, refRunB].map((run) => (run.served?.firstAnswerMs == null ? null : run.ms - run.served.firstAnswerMs));
  // 0.6, not 0.85: a loaded machine shortens or stretches that time by a third between runs, and a moment past the run's end faults nothing.
  if (answering.every((ms) => ms !== null)) return Math.round(0.6 * random() * Math.min(...(answering as number[])));
  return Math.round((0.05 + 0.85 * random()) * Math.min(refRunA.ms, refRunB.ms));
}

async function main(): Promise<number> {
  port = await freePort(7712);
  await startServer();
  await startWorker();
  let failures = 0;
  try {
    for (const scenario of await scenarios()) {
      await (scenario as Scenario & { setup?: () => Promise<void> }).setup?.();
      const shared = scenario.referenceGroup ? sharedReferences.get(scenario.referenceGroup) : undefined;
      const { refRunA, refA, refItems, refRunB, refB, byDesign } = shared ?? (await referenceRuns(scenario));
      if (scenario.referenceGroup && !shared)
        sharedReferences.set(scenario.referenceGroup, { refRunA, refA, refItems, refRunB, refB, byDesign });
      console.log(
        JSON.stringify({
          kind: 'reference',
          stage: scenario.stage,
          ...(shared ? { sharedWith: scenario.referenceGroup } : {}),
          ms: [refRunA.ms, refRunB.ms],
          orphans: [refRunA.orphans, refRunB.orphans],
          ...(refRunA.served ? { firstAnswerMs: [refRunA.served.firstAnswerMs, refRunB.served?.firstAnswerMs] } : {}),
          status: [refRunA.status, refRunB.status],
          artifacts: refA.files.length,
          bytesDifferByDesign: byDesign,
          items: refItems.items,
          requests: refRunA.requests,
        }),
      );
      const totals = {
        stage: scenario.stage,
        trials: 0,
        kills: 0,
        serverKills: 0,
        completed: 0,
        artifactsIdentical: 0,
        duplicated: 0,
        lost: 0,
        redoneRequests: 0,
        leftoverTemps: 0,
        orphans: 0,
        ...(isPolicyServerFault(scenario.fault) ? { faults: 0, restartedWorkers: 0, reapedAfterScope: 0 } : {}),
        ...(scenario.fault === 'stall-gpu-worker' ? { stalls: 0, forceKills: 0, gpuWorkerSurvived: 0 } : {}),
      };
      for (let trial = 1; trial <= TRIALS; trial++) {
        const killAtMs = killMoment(refRunA, refRunB);
        const killServer = trial % 3 === 1; // trials 1, 4, 7, 10: the short CI run kills the server too
        const run = await runOnce(scenario, { killAtMs, killServer });
        const completed = run.status === 'COMPLETED';
        const artifacts = completed ? await compare(scenario, snapshot(scenario, `trial-${trial}`), refA, refB) : null;
        const items = completed ? await itemCounts(scenario, refItems.keys) : null;
        const identical = artifacts !== null && artifacts.differing.length === 0 && artifacts.extra.length === 0;
        const survived = run.gpuWorkerSurvived ?? true;
        // As for a kill, a fault counts only when the run was still open at its moment (`served.faults` says whether).
        const ok = completed && identical && (items?.duplicated ?? 0) === 0 && (items?.lost ?? 0) === 0 && survived && run.orphans === 0;
        const line = {
          ok,
          kind: 'trial',
          stage: scenario.stage,
          trial,
          seed: SEED,
          killAtMs,
          killed: run.kills > 0,
          serverKilled: run.serverKills > 0,
          ...(scenario.fault === 'stall-gpu-worker'
            ? { stalledGpuWorker: (run.stalls ?? 0) > 0, forceKills: run.forceKills ?? 0, gpuWorkerSurvived: survived }
            : {}),
          ...(run.served ? { served: run.served } : {}),
          orphans: run.orphans,
          status: run.status,
          ms: run.ms,
          artifacts,
          items: items && {
            items: items.items,
            duplicated: items.duplicated,
            lost: items.lost,
            ...(Object.keys(items.byStatus).length > 0 ? { byStatus: items.byStatus } : {}),
          },
          requests: scenario.llm ? { trial: run.requests, reference: refRunA.requests, redone: run.requests - refRunA.requests } : null,
        };
        console.log(JSON.stringify(line));
        totals.trials += 1;
        totals.kills += run.kills;
        totals.serverKills += run.serverKills;
        totals.completed += completed ? 1 : 0;
        totals.artifactsIdentical += identical ? 1 : 0;
        totals.duplicated += items?.duplicated ?? 0;
        totals.lost += items?.lost ?? (completed ? 0 : refItems.items);
        totals.redoneRequests += scenario.llm ? run.requests - refRunA.requests : 0;
        totals.leftoverTemps += artifacts?.leftoverTemps.length ?? 0;
        totals.orphans += run.orphans;
        if (run.served) {
          totals.faults! += run.served.faults;
          totals.restartedWorkers! += run.served.restartedWorkers;
          totals.reapedAfterScope! += run.served.reapedAfterScope;
        }
        if (scenario.fault === 'stall-gpu-worker') {
          totals.stalls! += run.stalls ?? 0;
          totals.forceKills! += run.forceKills ?? 0;
          totals.gpuWorkerSurvived! += survived ? 1 : 0;
        }
        if (!ok) failures += 1;
      }
      console.log(JSON.stringify({ kind: 'summary', ...totals, bytesDifferByDesign: byDesign }));
      await scenario.llm?.close();
    }
  } finally {
    if (worker) await killWorkerProcess(worker);
    if (gpuWorker) await killWorkerProcess(gpuWorker);
    killOrphanedTrainer();
    killPolicyServerProcesses(policyServerProcesses());
    await killServer();
    rmSync(work, { recursive: true, force: true });
  }
  return failures === 0 ? 0 : 1;
}

// Stopped by a signal: stop the worker and the server this suite started (they run in their own process groups).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    void (async () => {
      if (worker) await killWorkerProcess(worker);
      if (gpuWorker) await killWorkerProcess(gpuWorker);
      killOrphanedTrainer();
      await killServer();
      rmSync(work, { recursive: true, force: true });
      process.exit(130);
    })();
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  },
);
