import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSweBenchHarness } from './swebench-adapter';
import { makeInstance } from '../../../test/fixtures/downstream/fixture';

/**
 * A stand-in for `python -m swebench.harness.run_evaluation`: reads the predictions JSONL and writes what
 * SWE-bench writes — the summary report `<model>.<run_id>.json` in its working directory and, per instance,
 * `logs/run_evaluation/<run_id>/<model>/<id>/report.json` and `run_instance.log`. The verdict per instance
 * comes from a marker in the patch text.
 */
const FAKE_SWEBENCH = String.raw`
import fs from 'node:fs';
import path from 'node:path';
const args = process.argv.slice(2);
const get = (flag) => args[args.indexOf(flag) + 1];
if (get('--mode') === 'hang') { fs.writeFileSync('pid', String(process.pid)); setInterval(() => {}, 1000); }
else {
  const runId = get('--run_id');
  const preds = fs.readFileSync(get('--predictions_path'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const model = preds[0].model_name_or_path.replaceAll('/', '__');
  const lists = { resolved_ids: [], unresolved_ids: [], empty_patch_ids: [], error_ids: [], completed_ids: [] };
  for (const p of preds) {
    const dir = path.join('logs', 'run_evaluation', runId, model, p.instance_id);
    fs.mkdirSync(dir, { recursive: true });
    const patch = p.model_patch;
    const status = (ok) => ({ FAIL_TO_PASS: { success: ok ? ['tests/test_ops.py::test_add'] : [], failure: ok ? [] : ['tests/test_ops.py::test_add'] }, PASS_TO_PASS: { success: ['tests/test_ops.py::test_mul'], failure: [] } });
    if (patch === '') { lists.empty_patch_ids.push(p.instance_id); continue; }
    if (patch.includes('SKIPPED')) continue;
    if (patch.includes('BADPATCH')) {
      fs.writeFileSync(path.join(dir, 'run_instance.log'), 'git apply --verbose\nerror: patch failed: calc/ops.py:1\n>>>>> Patch Apply Failed:\npatch unexpectedly ends\n');
      lists.error_ids.push(p.instance_id);
      continue;
    }
    if (patch.includes('CRASH')) {
      fs.writeFileSync(path.join(dir, 'run_instance.log'), 'docker.errors.APIError: 500 Server Error\n');
      lists.error_ids.push(p.instance_id);
      continue;
    }
    const ok = patch.includes('FIX');
    fs.writeFileSync(path.join(dir, 'report.json'), JSON.stringify({ [p.instance_id]: { patch_is_None: false, patch_exists: true, patch_successfully_applied: true, resolved: ok, tests_status: status(ok) } }));
    fs.writeFileSync(path.join(dir, 'run_instance.log'), 'Tests ran\n');
    (ok ? lists.resolved_ids : lists.unresolved_ids).push(p.instance_id);
    lists.completed_ids.push(p.instance_id);
  }
  fs.writeFileSync(model + '.' + runId + '.json', JSON.stringify({ total_instances: 500, submitted_instances: preds.length, ...lists, schema_version: 2 }));
}
`;

let dir: string;
let script: string;

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-swebench-'));
  script = path.join(dir, 'fake-swebench.mjs');
  await fs.writeFile(script, FAKE_SWEBENCH);
});
afterAll(async () => {
  await fs.rm(dir, { recursive: true, force: true });
});

const instance = (id: string) =>
  makeInstance({
    instance_id: id,
    repo: 'acme/calc',
    base_commit: 'a'.repeat(40),
    problem_statement: 'add is wrong',
    FAIL_TO_PASS: '["tests/test_ops.py::test_add"]',
  });

const harness = (mode = 'run', timeoutMs = 60_000) =>
  createSweBenchHarness({
    command: [
      process.execPath,
      script,
      '--mode',
      mode,
      '--predictions_path',
      '{predictions_path}',
      '--run_id',
      '{run_id}',
      '--max_workers',
      '2',
    ],
    workDir: path.join(dir, 'work dir'),
    modelName: 'acme/codegrep-v3',
    timeoutMs,
    inheritedEnv: process.env,
  });

describe('SWE-bench harness adapter', () => {
  it('writes SWE-bench predictions and maps the report lists to outcomes', async () => {
    const items = [
      ['calc-fixed', 'diff FIX'],
      ['calc-wrong', 'diff NOPE'],
      ['calc-empty', ''],
      ['calc-bad', 'diff BADPATCH'],
      ['calc-crash', 'diff CRASH'],
      ['calc-skipped', 'diff SKIPPED'],
    ].map(([id, patch]) => ({ instance: instance(id!), patch: patch! }));
    const results = await harness().evaluateBatch(items);
    const outcomes = Object.fromEntries([...results].map(([id, r]) => [id, [r.outcome, r.resolved]]));
    expect(outcomes).toEqual({
      'calc-fixed': ['resolved', true],
      'calc-wrong': ['unresolved', false],
      'calc-empty': ['unresolved', false],
      'calc-bad': ['patch_failed', false],
      'calc-crash': ['error', false],
      'calc-skipped': ['error', false],
    });
    expect(results.get('calc-fixed')!.failToPass).toEqual([{ test: 'tests/test_ops.py::test_add', passed: true }]);
    expect(results.get('calc-wrong')!.failToPass).toEqual([{ test: 'tests/test_ops.py::test_add', passed: false }]);
    expect(results.get('calc-wrong')!.passToPass).toEqual([{ test: 'tests/test_ops.py::test_mul', passed: true }]);
    expect(results.get('calc-bad')!.log).toContain('Patch Apply Failed');
    expect(results.get('calc-crash')!.log).toContain('APIError');
    expect(results.get('calc-skipped')!.log).toMatch(/in no list of the report/);

    const [runDir] = await fs.readdir(path.join(dir, 'work dir'));
    const predictions = (await fs.readFile(path.join(dir, 'work dir', runDir!, 'predictions.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(predictions[0]).toEqual({ instance_id: 'calc-fixed', model_name_or_path: 'acme/codegrep-v3', model_patch: 'diff FIX' });
    expect(predictions).toHaveLength(6);
  });

  it('evaluates one instance through the Harness interface', async () => {
    expect(await harness().evaluate(instance('calc-one'), 'diff FIX')).toMatchObject({ outcome: 'resolved', resolved: true });
  });

  it('says error when the harness leaves no report, timeout when it hangs', async () => {
    const broken = createSweBenchHarness({
      command: [process.execPath, '-e', 'process.exit(1)', '{predictions_path}'],
      workDir: path.join(dir, 'broken'),
      timeoutMs: 30_000,
      inheritedEnv: process.env,
    });
    const result = await broken.evaluate(instance('calc-x'), 'diff FIX');
    expect(result.outcome).toBe('error');
    expect(result.log).toMatch(/exit code 1/);
    expect(result.log).toMatch(/no report codegrep\.codegrep-[\w-]+\.json/);

    const hung = await harness('hang', 1_500).evaluate(instance('calc-y'), 'diff FIX');
    expect(hung.outcome).toBe('timeout');
    expect(hung.log).toMatch(/timed out after 1500 ms/);
  });

  it('refuses a command without the predictions path and duplicate instances', async () => {
    expect(() =>
      createSweBenchHarness({ command: 'python -m swebench.harness.run_evaluation', workDir: dir, timeoutMs: 1000, inheritedEnv: {} }),
    ).toThrow(/must pass \{predictions_path\}/);
    await expect(
      harness().evaluateBatch([
        { instance: instance('a'), patch: 'x' },
        { instance: instance('a'), patch: 'y' },
      ]),
    ).rejects.toThrow(/a appears twice/);
  });
});
