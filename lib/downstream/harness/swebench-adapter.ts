import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { DownstreamInstance, HarnessResult, TestStatus } from '../../../schemas/downstream';
import { compileCommand, type CommandTemplate } from '../runs/command-template';
import type { Harness } from './harness';
import { describeExit, runProcess, tail } from '../runs/run-process';

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

export function createSweBenchHarness(options: SweBenchHarnessOptions): SweBenchHarness {
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
    throw new RangeError(`SWE-bench harness: timeoutMs must be positive, got ${options.timeoutMs}`);
  const command = compileCommand(options.command, SWEBENCH_PLACEHOLDERS);
  if (!command.placeholders.has('predictions_path')) {
    throw new RangeError(`SWE-bench harness: the command ${command.template} must pass {predictions_path}`);
  }
  const modelName = options.modelName ?? 'codegrep';
  const modelSlug = modelName.replaceAll('/', '__');

  async function evaluateBatch(
    items: ReadonlyArray<{ instance: DownstreamInstance; patch: string }>,
    evalOptions: { signal?: AbortSignal } = {},
  ): Promise<Map<string, HarnessResult>> {
    const results = new Map<string, HarnessResult>();
    if (items.length === 0) return results;
    const ids = items.map((i) => i.instance.instance_id);
    const duplicate = ids.find((id, k) => ids.indexOf(id) !== k);
    if (duplicate) throw new RangeError(`SWE-bench harness: instance ${duplicate} appears twice in one batch`);

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
      ...(evalOptions.signal ? { signal: evalOptions.signal } : {}),
    });
    if (run.aborted) throw evalOptions.signal?.reason ?? new Error('SWE-bench harness cancelled');
    const header = `$ ${argv.map((a) => JSON.stringify(a)).join(' ')}\n→ ${describeExit(run, options.timeoutMs)} (run ${runId}, ${outputDir})`;
    const commandTail = tail(`${run.stdout}\n${run.stderr}`.trim(), 4000);

    const summary = run.timedOut ? null : await readJson(path.join(outputDir, `${modelSlug}.${runId}.json`));
    const resolved = summary ? idList(summary, 'resolved_ids') : new Set<string>();
    const unresolved = summary ? idList(summary, 'unresolved_ids') : new Set<string>();
    const empty = summary ? idList(summary, 'empty_patch_ids') : new Set<string>();
    const errored = summary ? idList(summary, 'error_ids') : new Set<string>();

    const classify = (id: string, instanceLog: string, instanceReport: Json | null): { outcome: HarnessResult['outcome']; why: string } => {
      if (run.timedOut) return { outcome: 'timeout', why: `the harness ran past ${options.timeoutMs} ms and was killed` };
      if (!summary)
        return { outcome: 'error', why: `no report ${modelSlug}.${runId}.json in ${outputDir}${commandTail ? `\n${commandTail}` : ''}` };
      if (resolved.has(id)) return { outcome: 'resolved', why: 'listed in resolved_ids' };
      if (unresolved.has(id)) return { outcome: 'unresolved', why: 'listed in unresolved_ids' };
      if (empty.has(id)) return { outcome: 'unresolved', why: 'listed in empty_patch_ids' };
      if (errored.has(id)) {
        const applyFailed = instanceLog.includes(APPLY_PATCH_FAIL) || instanceReport?.patch_successfully_applied === false;
        return applyFailed
          ? { outcome: 'patch_failed', why: 'the patch did not apply (run_instance.log)' }
          : { outcome: 'error', why: 'listed in error_ids' };
      }
      return { outcome: 'error', why: 'in no list of the report (not evaluated)' };
    };

    for (const { instance } of items) {
      const id = instance.instance_id;
      const logDir = path.join(outputDir, 'logs', 'run_evaluation', runId, modelSlug, id);
      const report = await readJson(path.join(logDir, 'report.json'));
      const instanceReport = report && isObject(report[id]) ? report[id] : null;
      const instanceLog = await fs.readFile(path.join(logDir, 'run_instance.log'), 'utf8').catch(() => '');
      const failToPass = testStatuses(instanceReport, 'FAIL_TO_PASS');
      const passToPass = testStatuses(instanceReport, 'PASS_TO_PASS');
      const { outcome, why } = classify(id, instanceLog, instanceReport);
      results.set(id, {
        resolved: outcome === 'resolved',
        outcome,
        log: [header, `${id}: ${why}`, instanceLog ? tail(instanceLog, 8000) : ''].filter(Boolean).join('\n'),
        failToPass,
        passToPass,
      });
    }
    return results;
  }

  return {
    name: options.name ?? 'swebench',
    evaluateBatch,
    async evaluate(instance, patch, evalOptions = {}) {
      const results = await evaluateBatch([{ instance, patch }], evalOptions);
      return results.get(instance.instance_id)!;
    },
  };
}
