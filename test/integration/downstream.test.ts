import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects, writeParquetArtifact } from '../../lib/artifacts';
import { AGENT_PREDICTIONS_SCHEMA_NAME, AGENT_PREDICTIONS_SCHEMA_VERSION, agentPredictionsArrowSchema } from '../../schemas/agent';
import { DownstreamRunRecordSchema, type DownstreamResult } from '../../schemas/downstream';
import type { WorkflowProgress } from '../../schemas/progress';
import { git } from '../support/fixture-repos';
import { startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';
import {
  USAGE,
  agentScript,
  buildCalcFixture,
  calcDownstreamInput,
  identify,
  pythonWithPytest,
  type CalcFixture,
} from './downstream-fixture';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-downstream-it-'));
const dataDir = path.join(work, 'runs');
const taskQueue = uniqueTaskQueue('downstream-it');
let fixture: CalcFixture;
let python: string;
let server: ScriptedOpenAiServer;
let stopWorker: () => Promise<void>;

beforeAll(async () => {
  fixture = buildCalcFixture(work);
  python = pythonWithPytest();
  server = await startScriptedOpenAiServer({ script: agentScript(), latencyMs: 20 });
  ({ stop: stopWorker } = await startWorker(taskQueue));
});
afterAll(async () => {
  await stopWorker?.();
  await server?.close();
  rmSync(work, { recursive: true, force: true });
});

function runConfig(runId: string, downstream: Record<string, unknown>): Record<string, unknown> {
  return calcDownstreamInput({ runId, dataDir, fixture, baseUrl: server.baseUrl, python, concurrency: 2, downstream });
}

async function execute(
  workflowId: string,
  config: Record<string, unknown>,
): Promise<{ result: DownstreamResult; progress: WorkflowProgress }> {
  const { client, close } = await testClient();
  try {
    const handle = await client.workflow.start('downstream', { taskQueue, workflowId, args: [config] });
    const result = (await handle.result()) as DownstreamResult;
    return { result, progress: await handle.query<WorkflowProgress>('progress') };
  } finally {
    await close();
  }
}

/** The innermost failure message of a failed workflow (the activity's own words). */
async function failure(workflowId: string, config: Record<string, unknown>): Promise<string> {
  const { client, close } = await testClient();
  try {
    await client.workflow.execute('downstream', { taskQueue, workflowId, args: [config] });
  } catch (error) {
    let current: unknown = error;
    let message = '';
    while (current instanceof Error) {
      message = current.message || message;
      current = (current as Error & { cause?: unknown }).cause;
    }
    return message;
  } finally {
    await close();
  }
  throw new Error(`workflow ${workflowId} did not fail`);
}

/** A process that exists and is not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

const tokens = (...usages: Array<{ prompt_tokens: number; completion_tokens: number }>) => ({
  inputTokens: usages.reduce((s, u) => s + u.prompt_tokens, 0),
  outputTokens: usages.reduce((s, u) => s + u.completion_tokens, 0),
});

describe('downstream stage on the real dev server', () => {
  it('runs none and oracle on every instance, writes runs.parquet, Table 3 and the report; a rerun runs nothing', async () => {
    const config = runConfig('ds-main', {});
    const { result, progress } = await execute('ds-main/downstream', config);
    expect(result).toMatchObject({ pairs: 6, ran: 6, reusedBeforeStart: 0 });

    // One row per (configuration, instance), instance-major, rounds and tokens exactly the scripted usage.
    const rows = await readParquetObjects(result.runs.uri);
    expect(result.runs).toMatchObject({ rows: 6, schema: 'downstream.runs', schemaVersion: 2 });
    const gaveUp = {
      resolved: false,
      outcome: 'unresolved',
      rounds: 2,
      ...tokens(USAGE.explore, USAGE.giveUp),
      patchBytes: 0,
      endReason: 'no_tool_call',
      error: null,
    };
    const oracle = {
      resolved: true,
      outcome: 'resolved',
      rounds: 2,
      ...tokens(USAGE.fix, USAGE.submit),
      endReason: 'submitted',
      error: null,
    };
    expect(rows.map((r) => [r.configuration, r.instanceId])).toEqual([
      ['baseline', 'acme__calc-1'],
      ['oracle', 'acme__calc-1'],
      ['baseline', 'acme__calc-2'],
      ['oracle', 'acme__calc-2'],
      ['baseline', 'acme__calc-3'],
      ['oracle', 'acme__calc-3'],
    ]);
    expect(rows[0]).toMatchObject(gaveUp);
    expect(rows[2]).toMatchObject(gaveUp);
    expect(rows[4]).toMatchObject({
      resolved: true,
      outcome: 'resolved',
      rounds: 3,
      ...tokens(USAGE.search, USAGE.fixAfterSearch, USAGE.submitAfterSearch),
      endReason: 'submitted',
    });
    for (const i of [1, 3, 5]) expect(rows[i]).toMatchObject(oracle);
    for (const i of [1, 3, 4, 5]) expect(rows[i]!.patchBytes).toBeGreaterThan(0);

    // Table 3: none resolves 1/3 (3 rounds, 990 tokens), oracle 3/3 (2 rounds, 330 tokens); paired on the one
    // instance both resolve: rounds 3 → 2, tokens 990 → 330; McNemar b = 0, c = 2, exact p = 2 · 0.5² = 0.5.
    const [base, orc] = result.tableValues.rows;
    expect(base).toMatchObject({ configuration: 'baseline', instances: 3, resolved: 1, errors: 0, vsBaseline: null });
    expect(base!.resolveRate).toBeCloseTo(1 / 3, 12);
    expect(base!.resolvedRounds).toMatchObject({ n: 1, mean: 3 });
    expect(base!.resolvedTokens).toMatchObject({ n: 1, mean: 990 });
    expect(base!.unresolvedRounds).toMatchObject({ n: 2, mean: 2 });
    expect(orc).toMatchObject({ configuration: 'oracle', instances: 3, resolved: 3, resolveRate: 1 });
    expect(orc!.resolvedRounds).toMatchObject({ n: 3, mean: 2 });
    expect(orc!.resolvedTokens).toMatchObject({ n: 3, mean: 330 });
    expect(orc!.unresolvedRounds).toEqual({ n: 0, mean: null, interval: null });
    expect(orc!.vsBaseline).toMatchObject({ baseline: 'baseline', common: 3, mcnemar: { b: 0, c: 2, pValue: 0.5 }, bothResolved: 1 });
    expect(orc!.vsBaseline!.resolveRateDifference).toBeCloseTo(2 / 3, 12);
    expect(orc!.vsBaseline!.pairedRounds).toMatchObject({ n: 1, baseline: 3, value: 2 });
    expect(orc!.vsBaseline!.pairedRounds.relativeChange).toBeCloseTo(-1 / 3, 12);
    expect(orc!.vsBaseline!.pairedTokens).toMatchObject({ n: 1, baseline: 990, value: 330 });
    expect(orc!.vsBaseline!.pairedTokens.relativeChange).toBeCloseTo(-2 / 3, 12);
    expect(base!.resolveRateInterval).toMatchObject({ resamples: 1000, confidence: 0.95, seed: 0 });
    expect(result.outcomes).toEqual({ baseline: { unresolved: 2, resolved: 1 }, oracle: { resolved: 3 } });
    expect(result.endReasons).toEqual({ baseline: { no_tool_call: 2, submitted: 1 }, oracle: { submitted: 3 } });
    const tableJson = JSON.parse(readFileSync(result.table.uri, 'utf8'));
    expect(tableJson.rows).toEqual(result.tableValues.rows);
    expect(existsSync(`${result.table.uri}.manifest.json`)).toBe(true);

    // The report: Table 3 as lib/downstream formats it, the paired sentence, and a self-contained HTML section.
    const markdown = readFileSync(result.reportMarkdown, 'utf8');
    expect(markdown).toContain('| baseline | 33.3% | 3.0 | 990 | 2.0 | – |');
    expect(markdown).toContain('| oracle | 100.0% | 2.0 | 330 | – | +66.7pp');
    expect(markdown).toContain('0.500 (0/2) | 1 | 3.0 → 2.0 (-33.3%) | 990 → 330 (-66.7%) |');
    expect(markdown).toContain('oracle vs baseline: on the 1 instance(s) both resolve, rounds 3.0 → 2.0 (-33.3%');
    expect(markdown).toContain('| acme__calc-3 | resolved, 3 r., 990 tok. | resolved, 2 r., 330 tok. |');
    const html = readFileSync(result.reportHtml, 'utf8');
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('<section class="codegrep-stage" id="downstream">');
    expect(html).toContain('<td>oracle</td><td>100.0%</td><td>2.0</td><td>330</td>');
    expect(html).not.toMatch(/<script|<link|\ssrc=|url\(/i);

    // Each run left a record (the durable truth) with the injection, the actions and the tests, and its conversation.
    const recordPath = path.join(dataDir, 'ds-main', 'downstream', 'runs', 'oracle', 'acme__calc-2.json');
    const record = DownstreamRunRecordSchema.parse(JSON.parse(readFileSync(recordPath, 'utf8')));
    expect(record.injection).toEqual({ files: ['calc/text.py'], dropped: [], hadPrediction: null });
    expect(record.actions).toEqual([
      { round: 1, tool: 'str_replace_editor', command: 'str_replace', path: 'calc/text.py' },
      { round: 2, tool: 'submit', command: null, path: null },
    ]);
    expect(record.harness!.failToPass).toEqual([
      { test: 'tests/test_text.py::test_shout', passed: true },
      { test: 'tests/test_text.py::test_shout_empty', passed: true },
    ]);
    expect(record.patch).toContain('-    return s.lower()\n+    return s.upper()');
    const trajectory = JSON.parse(readFileSync(path.join(path.dirname(recordPath), record.trajectoryPath!), 'utf8'));
    expect(trajectory.map((m: { role: string }) => m.role)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool']);

    // What the frozen agent was told: the issue alone for none, the gold files appended for oracle.
    const prompts = server.requests.filter((r) => r.body && identify(r.body).round === 0).map((r) => identify(r.body!));
    expect(prompts).toHaveLength(6);
    expect(prompts.filter((p) => p.candidates.length === 0)).toHaveLength(3);
    expect(
      prompts
        .filter((p) => p.candidates.length > 0)
        .map((p) => [p.bug.id, p.candidates])
        .sort(),
    ).toEqual([
      ['acme__calc-1', ['calc/ops.py']],
      ['acme__calc-2', ['calc/text.py']],
      ['acme__calc-3', ['calc/units.py']],
    ]);
    expect(server.requests).toHaveLength(2 + 2 + 3 + 2 + 2 + 2);
    expect(server.peakInFlight).toBeLessThanOrEqual(2);

    // No checkout is left behind, on disk or registered in the bare clone.
    const checkouts = path.join(dataDir, 'ds-main', 'downstream', 'checkouts');
    const leftovers = existsSync(checkouts) ? readdirSync(checkouts, { recursive: true }) : [];
    expect(leftovers.filter((entry) => String(entry).split(path.sep).length > 2)).toEqual([]);
    expect(git(path.join(dataDir, 'repos', 'acme__calc.git'), 'worktree', 'list').split('\n')).toHaveLength(1);

    expect(progress.done).toBe(true);
    expect(Object.fromEntries(Object.entries(progress.stages).map(([k, v]) => [k, v.status]))).toEqual({
      plan: 'completed',
      runs: 'completed',
      summary: 'completed',
    });
    expect(progress.stages.runs!.progress).toMatchObject({ done: 6, total: 6, unit: 'runs' });

    // Starting the stage again reuses every finished run: no model call, the same rows.
    const requestsBefore = server.requests.length;
    const again = await execute('ds-main/downstream-again', config);
    expect(again.result).toMatchObject({ pairs: 6, ran: 0, reusedBeforeStart: 6 });
    expect(server.requests.length).toBe(requestsBefore);
    expect(await readParquetObjects(again.result.runs.uri)).toEqual(rows);
  });

  it('injects predictions from an outside JSONL (cut to k) and from an evaluation-style Parquet (the retriever named like the configuration)', async () => {
    const jsonl = path.join(work, 'bm25.predictions.jsonl');
    writeFileSync(
      jsonl,
      [
        JSON.stringify({ instance_id: 'acme__calc-1', found_files: ['calc/text.py', 'calc/ops.py', 'README.md'] }),
        '{ not json',
        JSON.stringify({ instance_id: 'acme__calc-99', found_files: ['x.py'] }),
      ].join('\n') + '\n',
    );
    const prediction = (instanceId: string, retriever: string, files: string[]) => ({
      instanceId,
      retriever,
      answerFormat: 'codegrep',
      files,
      lineRanges: [],
      locations: [],
      turns: 2,
      toolCalls: 3,
      finishCalls: 0,
      promptTokens: 1000,
      completionTokens: 50,
      answerValid: true,
      answerError: null,
      endReason: 'answer',
    });
    const parquet = await writeParquetArtifact({
      path: path.join(work, 'evaluation', 'predictions.parquet'),
      schemaName: AGENT_PREDICTIONS_SCHEMA_NAME,
      schemaVersion: AGENT_PREDICTIONS_SCHEMA_VERSION,
      arrowSchema: agentPredictionsArrowSchema,
      rows: [
        prediction('acme__calc-1', 'codegrep-v3', ['calc/ops.py']),
        prediction('acme__calc-2', 'codegrep-v3', ['calc/text.py']),
        prediction('acme__calc-1', 'bm25', ['README.md']),
      ],
      inputs: [],
      configHash: '0'.repeat(64),
    });
    const requestsBefore = server.requests.length;
    const { result } = await execute(
      'ds-predictions/downstream',
      runConfig('ds-predictions', {
        configurations: [
          { name: 'baseline', source: 'none' },
          { name: 'bm25 top-2', source: 'predictions', predictions: jsonl, k: 2 },
          // No `retriever`: the configuration is named like one of the file's retrievers.
          { name: 'codegrep-v3', source: 'predictions', predictions: parquet.uri },
        ],
        instances: ['acme__calc-2', 'acme__calc-1'],
      }),
    );
    expect(result).toMatchObject({ pairs: 6, ran: 6 });
    const rows = await readParquetObjects(result.runs.uri);
    const byPair = new Map(rows.map((r) => [`${r.configuration}/${r.instanceId}`, r]));
    // bm25 lists text.py first: the agent views it, then fixes ops.py (3 rounds); it has no line for calc-2,
    // which therefore runs with the issue unchanged and ends like the baseline.
    expect(byPair.get('bm25 top-2/acme__calc-1')).toMatchObject({
      resolved: true,
      rounds: 3,
      ...tokens(USAGE.viewWrong, USAGE.fix, USAGE.submit),
    });
    expect(byPair.get('bm25 top-2/acme__calc-2')).toMatchObject({ resolved: false, outcome: 'unresolved', rounds: 2 });
    expect(byPair.get('codegrep-v3/acme__calc-1')).toMatchObject({ resolved: true, rounds: 2 });
    expect(byPair.get('codegrep-v3/acme__calc-2')).toMatchObject({ resolved: true, rounds: 2 });
    // The subset's order is the run order.
    expect(rows.map((r) => r.instanceId)).toEqual([
      'acme__calc-2',
      'acme__calc-2',
      'acme__calc-2',
      'acme__calc-1',
      'acme__calc-1',
      'acme__calc-1',
    ]);

    const firstPrompts = server.requests
      .slice(requestsBefore)
      .filter((r) => identify(r.body!).round === 0 && identify(r.body!).bug.id === 'acme__calc-1')
      .map((r) => r.body!.messages!.find((m) => m.role === 'user')!.content as string);
    // The block is appended to the issue after one blank line (App. E), inside the agent's issue section.
    const issue = 'add(2, 3) returns -1 instead of 5.\n\n';
    expect(
      firstPrompts.filter((t) => t.includes(`${issue}<candidate_files>\n- calc/text.py\n- calc/ops.py\n</candidate_files>\n`)),
    ).toHaveLength(1);
    expect(firstPrompts.filter((t) => t.includes(`${issue}<candidate_files>\n- calc/ops.py\n</candidate_files>\n`))).toHaveLength(1);
    expect(firstPrompts.filter((t) => !t.includes('<candidate_files>'))).toHaveLength(1);

    const record = (configuration: string, instance: string) =>
      DownstreamRunRecordSchema.parse(
        JSON.parse(readFileSync(path.join(dataDir, 'ds-predictions', 'downstream', 'runs', configuration, `${instance}.json`), 'utf8')),
      );
    const bm25Dir = readdirSync(path.join(dataDir, 'ds-predictions', 'downstream', 'runs')).find((d) => d.startsWith('bm25_top-2-'))!;
    expect(record(bm25Dir, 'acme__calc-1').injection).toEqual({
      files: ['calc/text.py', 'calc/ops.py'],
      dropped: [{ path: 'README.md', reason: 'beyond k = 2' }],
      hadPrediction: true,
    });
    expect(record(bm25Dir, 'acme__calc-2').injection).toEqual({ files: [], dropped: [], hadPrediction: false });

    const markdown = readFileSync(result.reportMarkdown, 'utf8');
    expect(markdown).toContain(
      `bm25 top-2: predictions from ${jsonl} (jsonl), first 2 file(s); no prediction for 1 instance(s) (acme__calc-2), run with the issue unchanged; 1 unusable prediction row(s), first: line 2: invalid JSON`,
    );
    expect(markdown).toContain(`codegrep-v3: predictions from ${parquet.uri} (parquet, retriever codegrep-v3).`);
  });

  it('cancelling the stage kills the agent process group, removes its checkout and writes no record', async () => {
    const pidFile = path.join(work, 'agent.pids');
    const runId = 'ds-cancel';
    const cfg = runConfig(runId, {
      configurations: [{ name: 'baseline', source: 'none' }],
      instances: ['acme__calc-1'],
      // An outside agent that never ends: a shell and its background child, both pids written down.
      agent: {
        kind: 'openhands',
        command: ['sh', '-c', 'sleep 300 & echo $! > "$PID_FILE"; echo $$ >> "$PID_FILE"; wait'],
        timeoutMs: 600_000,
        env: { PID_FILE: pidFile },
      },
    });
    // Cancellation reaches an activity with its next heartbeat: a short heartbeat timeout keeps the test short.
    cfg.temporal = { activityTimeouts: { downstream: { heartbeatMs: 2_000 } } };
    const { client, close } = await testClient();
    try {
      const handle = await client.workflow.start('downstream', { taskQueue, workflowId: `${runId}/downstream`, args: [cfg] });
      const deadline = Date.now() + 60_000;
      while (!(existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim().split('\n').length === 2)) {
        if (Date.now() > deadline) throw new Error('the agent never started');
        await new Promise((r) => setTimeout(r, 50));
      }
      const pids = readFileSync(pidFile, 'utf8').trim().split('\n').map(Number);
      expect(pids.every(alive)).toBe(true);
      await handle.cancel();
      const error = await handle.result().then(
        () => null,
        (e: unknown) => e,
      );
      expect((error as Error & { cause?: Error }).cause?.name).toBe('CancelledFailure');
      // The workflow waits for its runs to stop: by now both processes are gone.
      expect(pids.filter(alive)).toEqual([]);
      const downstreamDir = path.join(dataDir, runId, 'downstream');
      expect(existsSync(path.join(downstreamDir, 'runs', 'baseline', 'acme__calc-1.json'))).toBe(false);
      expect(
        readdirSync(path.join(downstreamDir, 'checkouts'), { recursive: true }).filter((e) => String(e).split(path.sep).length > 1),
      ).toEqual([]);
    } finally {
      await close();
    }
  });

  it('a run past runTimeoutMs is stopped, its processes killed, and recorded as an error row that the table counts', async () => {
    const pidFile = path.join(work, 'slow-agent.pids');
    const runId = 'ds-run-timeout';
    const { result } = await execute(
      `${runId}/downstream`,
      runConfig(runId, {
        configurations: [{ name: 'baseline', source: 'none' }],
        instances: ['acme__calc-1'],
        agent: {
          kind: 'openhands',
          command: ['sh', '-c', 'sleep 300 & echo $! > "$PID_FILE"; echo $$ >> "$PID_FILE"; wait'],
          timeoutMs: 600_000,
          env: { PID_FILE: pidFile },
        },
        runTimeoutMs: 1_500,
      }),
    );
    const rows = await readParquetObjects(result.runs.uri);
    expect(rows).toEqual([
      {
        configuration: 'baseline',
        instanceId: 'acme__calc-1',
        resolved: false,
        outcome: 'error',
        rounds: 0,
        inputTokens: 0,
        outputTokens: 0,
        patchBytes: 0,
        endReason: 'timeout',
        error: 'run: the run (agent and harness) passed downstream.runTimeoutMs = 1500 ms and was stopped; its processes were killed',
        // No trained policy chose this configuration's files (source: none).
        servedModel: null,
        baseModel: null,
        checkpointStep: null,
        adapterSha256: null,
      },
    ]);
    expect(result.tableValues.rows[0]).toMatchObject({ instances: 1, resolved: 0, errors: 1, resolveRate: 0 });
    expect(readFileSync(pidFile, 'utf8').trim().split('\n').map(Number).filter(alive)).toEqual([]);
  });

  it('fails at once, naming the config key, on a missing predictions file, an ambiguous Parquet, an unknown instance or a missing section', async () => {
    const missing = path.join(work, 'nowhere.jsonl');
    const withPredictions = (extra: Record<string, unknown>) =>
      runConfig('ds-bad', {
        configurations: [
          { name: 'baseline', source: 'none' },
          { name: 'r', source: 'predictions', ...extra },
        ],
      });
    expect(await failure('ds-bad/missing-file', withPredictions({ predictions: missing }))).toBe(
      `downstream.configurations.1.predictions (r): file ${missing} does not exist`,
    );
    const ambiguous = path.join(work, 'evaluation', 'predictions.parquet');
    expect(await failure('ds-bad/ambiguous', withPredictions({ predictions: ambiguous }))).toContain(
      `${ambiguous} holds 2 retrievers (bm25, codegrep-v3); set downstream.configurations.1.retriever to one of them, or name the configuration like it`,
    );
    expect(await failure('ds-bad/unknown-retriever', withPredictions({ predictions: ambiguous, retriever: 'nope' }))).toBe(
      `downstream.configurations.1.retriever (r): ${ambiguous} has no rows of retriever "nope" (it has bm25, codegrep-v3)`,
    );
    expect(await failure('ds-bad/no-file', withPredictions({}))).toContain(
      'downstream.configurations.1 (r) has source "predictions" but no predictions file',
    );
    expect(await failure('ds-bad/unknown-instance', runConfig('ds-bad', { instances: ['acme__calc-1', 'acme__calc-404'] }))).toContain(
      'downstream.instances: 1 id(s) are not valid instances of',
    );
    expect(await failure('ds-bad/baseline', runConfig('ds-bad', { baseline: 'nope' }))).toContain(
      'downstream.baseline: "nope" is not one of the configurations (baseline, oracle)',
    );
    const { downstream: _omitted, ...withoutSection } = runConfig('ds-bad', {});
    expect(await failure('ds-bad/no-section', withoutSection)).toContain('downstream: required to run the downstream stage');
    // Nothing ran.
    expect(existsSync(path.join(dataDir, 'ds-bad', 'downstream', 'runs'))).toBe(false);
  });
});
