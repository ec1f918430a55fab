import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { DownstreamInstance, HarnessResult, TestStatus } from '../../../schemas/downstream';
import { compileCommand, type CommandTemplate, type CompiledCommand } from '../runs/command-template';
import type { Harness } from './harness';
import { describeExit, runProcess, tail, type ProcessResult } from '../runs/run-process';

/**
 * The SWE-bench harness (Docker images per instance) run as an outside command, e.g.
 *
 *     python -m swebench.harness.run_evaluation --dataset_name princeton-nlp/SWE-bench_Verified
 *       --predictions_path {predictions_path} --run_id {run_id} --max_workers 8
 *
 * Placeholders: {predictions_path} (a JSONL file of `{instance_id, model_name_or_path, model_patch}` lines
 * written for the call), {run_id} (fresh per call), {model_name}, {output_dir} (the command's working
 * directory, where SWE-bench writes its report and logs). What it writes there is read back:
 *
 * - the summary report `<model_name with / → __>.<run_id>.json` (`resolved_ids`, `unresolved_ids`,
 *   `empty_patch_ids`, `error_ids`, …): resolved ids are `resolved`, unresolved and empty-patch ids are
 *   `unresolved`, error ids are `patch_failed` when the instance log says the patch did not apply
 *   (SWE-bench's `>>>>> Patch Apply Failed`) and `error` otherwise, ids in no list are `error`;
 * - per instance, `logs/run_evaluation/<run_id>/<model>/<instance_id>/report.json` (`tests_status`
 *   FAIL_TO_PASS / PASS_TO_PASS success and failure lists) and `run_instance.log` for the log.
 *
 * A command past `timeoutMs` is killed with its process group and every instance of the call is `timeout`.
 * `evaluateBatch` evaluates many patches with one command (how SWE-bench is meant to run); `evaluate` is
 * the one-instance Harness form of it.
 */
export const SWEBENCH_PLACEHOLDERS = ['predictions_path', 'run_id', 'model_name', 'output_dir'] as const;

/** SWE-bench's marker in run_instance.log when neither `git apply` nor `patch` could apply the prediction. */
const APPLY_PATCH_FAIL = 'Patch Apply Failed';

export interface SweBenchHarnessOptions {
  command: CommandTemplate;
  /** Where each call gets its own directory (predictions, SWE-bench's report and logs). */
  workDir: string;
  /** `model_name_or_path` of the predictions (default `codegrep`). */
  modelName?: string;
  timeoutMs: number;
  /** The environment the command inherits (the worker's, read once at start: activities/kit/deps.ts). */
  inheritedEnv: Readonly<Record<string, string | undefined>>;
  /** Added to the inherited environment. */
  env?: Record<string, string>;
  name?: string;
}

export interface SweBenchHarness extends Harness {
  evaluateBatch(
    items: ReadonlyArray<{ instance: DownstreamInstance; patch: string }>,
    options?: { signal?: AbortSignal },
  ): Promise<Map<string, HarnessResult>>;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);
const idList = (report: Json, key: string): Set<string> =>
  new Set(Array.isArray(report[key]) ? (report[key] as unknown[]).filter((v): v is string => typeof v === 'string') : []);

function testStatuses(report: Json | null, key: 'FAIL_TO_PASS' | 'PASS_TO_PASS'): TestStatus[] {
  const status = report && isObject(report.tests_status) && isObject(report.tests_status[key]) ? report.tests_status[key] : null;
  if (!status) return [];
  const list = (name: string) =>
    Array.isArray(status[name]) ? (status[name] as unknown[]).filter((v): v is string => typeof v === 'string') : [];
  return [...list('success').map((test) => ({ test, passed: true })), ...list('failure').map((test) => ({ test, passed: false }))];
}

async function readJson(file: string): Promise<Json | null> {
  try {
    const value: unknown = JSON.parse(await fs.readFile(file, 'utf8'));
    return isObject(value) ? value : null;
  } catch {
    return null;
  }
}

/** A harness's options, checked and resolved once for all its calls. */
interface SweBenchSetup {
  options: SweBenchHarnessOptions;
  command: CompiledCommand;
  modelName: string;
  /** The model name as SWE-bench spells it in file and folder names. */
  modelSlug: string;
}

type BatchItems = ReadonlyArray<{ instance: DownstreamInstance; patch: string }>;

export function createSweBenchHarness(options: SweBenchHarnessOptions): SweBenchHarness {
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
    throw new RangeError(`SWE-bench harness: timeoutMs must be positive, got ${options.timeoutMs}`);
  const command = compileCommand(options.command, SWEBENCH_PLACEHOLDERS);
  if (!command.placeholders.has('predictions_path')) {
    throw new RangeError(`SWE-bench harness: the command ${command.template} must pass {predictions_path}`);
  }
  const modelName = options.modelName ?? 'codegrep';
  const modelSlug = modelName.replaceAll('/', '__');
  const setup: SweBenchSetup = { options, command, modelName, modelSlug };
  const evaluateBatch = (items: BatchItems, evalOptions: { signal?: AbortSignal } = {}) => evaluateSweBenchBatch(setup, items, evalOptions);

  return {
    name: options.name ?? 'swebench',
    evaluateBatch,
    async evaluate(instance, patch, evalOptions = {}) {
      const results = await evaluateBatch([{ instance, patch }], evalOptions);
      return results.get(instance.instance_id)!;
    },
  };
}

/** One call of the command for every item, then each instance's outcome read back from what it wrote. */
async function evaluateSweBenchBatch(
  setup: SweBenchSetup,
  items: BatchItems,
  evalOptions: { signal?: AbortSignal },
): Promise<Map<string, HarnessResult>> {
  const results = new Map<string, HarnessResult>();
  if (items.length === 0) return results;
  const ids = items.map((i) => i.instance.instance_id);
  const duplicate = ids.find((id, k) => ids.indexOf(id) !== k);
  if (duplicate) throw new RangeError(`SWE-bench harness: instance ${duplicate} appears twice in one batch`);

  const batch = await runBatch(setup, items, evalOptions.signal);
  const lists = batch.run.timedOut ? null : await readSummaryLists(path.join(batch.outputDir, `${setup.modelSlug}.${batch.runId}.json`));

  for (const { instance } of items) {
    const id = instance.instance_id;
    const logDir = path.join(batch.outputDir, 'logs', 'run_evaluation', batch.runId, setup.modelSlug, id);
    const report = await readJson(path.join(logDir, 'report.json'));
    const instanceReport = report && isObject(report[id]) ? report[id] : null;
    const instanceLog = await fs.readFile(path.join(logDir, 'run_instance.log'), 'utf8').catch(() => '');
    const failToPass = testStatuses(instanceReport, 'FAIL_TO_PASS');
    const passToPass = testStatuses(instanceReport, 'PASS_TO_PASS');
    const { outcome, why } = classify(setup, batch, lists, id, instanceLog, instanceReport);
    results.set(id, {
      resolved: outcome === 'resolved',
      outcome,
      log: [batch.header, `${id}: ${why}`, instanceLog ? tail(instanceLog, 8000) : ''].filter(Boolean).join('\n'),
      failToPass,
      passToPass,
    });
  }
  return results;
}

/** One call of the command: its own directory, the process's result, and the log lines every instance shares. */
interface BatchRun {
  runId: string;
  outputDir: string;
  run: ProcessResult;
  header: string;
  commandTail: string;
}

/** The predictions file of the items in a fresh run directory, and the command run on it. */
async function runBatch(setup: SweBenchSetup, items: BatchItems, signal: AbortSignal | undefined): Promise<BatchRun> {
  const { options, command, modelName } = setup;
  const runId = `codegrep-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
  const outputDir = path.resolve(options.workDir, runId);
  await fs.mkdir(outputDir, { recursive: true });
  const predictionsPath = path.join(outputDir, 'predictions.jsonl');
  await fs.writeFile(
    predictionsPath,
    items
      .map(({ instance, patch }) =>
        JSON.stringify({ instance_id: instance.instance_id, model_name_or_path: modelName, model_patch: patch }),
      )
      .join('\n') + '\n',
  );
  const argv = command.render({ predictions_path: predictionsPath, run_id: runId, model_name: modelName, output_dir: outputDir });
  const run = await runProcess(argv, {
    cwd: outputDir,
    timeoutMs: options.timeoutMs,
    env: { ...options.inheritedEnv, ...options.env },
    ...(signal ? { signal } : {}),
  });
  if (run.aborted) throw signal?.reason ?? new Error('SWE-bench harness cancelled');
  const header = `$ ${argv.map((a) => JSON.stringify(a)).join(' ')}\n→ ${describeExit(run, options.timeoutMs)} (run ${runId}, ${outputDir})`;
  const commandTail = tail(`${run.stdout}\n${run.stderr}`.trim(), 4000);
  return { runId, outputDir, run, header, commandTail };
}

/** The id lists of SWE-bench's summary report. */
interface SummaryLists {
  resolved: Set<string>;
  unresolved: Set<string>;
  empty: Set<string>;
  errored: Set<string>;
}

/** The summary report's lists; null when the call wrote no readable report. */
async function readSummaryLists(file: string): Promise<SummaryLists | null> {
  const summary = await readJson(file);
  if (!summary) return null;
  return {
    resolved: idList(summary, 'resolved_ids'),
    unresolved: idList(summary, 'unresolved_ids'),
    empty: idList(summary, 'empty_patch_ids'),
    errored: idList(summary, 'error_ids'),
  };
}

/** An instance's outcome by the rules of the header; `lists` is null when the call wrote no summary report. */
function classify(
  setup: SweBenchSetup,
  batch: BatchRun,
  lists: SummaryLists | null,
  id: string,
  instanceLog: string,
  instanceReport: Json | null,
): { outcome: HarnessResult['outcome']; why: string } {
  if (batch.run.timedOut) return { outcome: 'timeout', why: `the harness ran past ${setup.options.timeoutMs} ms and was killed` };
  if (!lists)
    return {
      outcome: 'error',
      why: `no report ${setup.modelSlug}.${batch.runId}.json in ${batch.outputDir}${batch.commandTail ? `\n${batch.commandTail}` : ''}`,
    };
  if (lists.resolved.has(id)) return { outcome: 'resolved', why: 'listed in resolved_ids' };
  if (lists.unresolved.has(id)) return { outcome: 'unresolved', why: 'listed in unresolved_ids' };
  if (lists.empty.has(id)) return { outcome: 'unresolved', why: 'listed in empty_patch_ids' };
  if (lists.errored.has(id)) {
    const applyFailed = instanceLog.includes(APPLY_PATCH_FAIL) || instanceReport?.patch_successfully_applied === false;
    return applyFailed
      ? { outcome: 'patch_failed', why: 'the patch did not apply (run_instance.log)' }
      : { outcome: 'error', why: 'listed in error_ids' };
  }
  return { outcome: 'error', why: 'in no list of the report (not evaluated)' };
}
