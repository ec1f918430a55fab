import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { retrieveTopK } from '../../lib/retrievers/bm25/retriever';
import { indexWorktree } from '../../lib/retrievers/bm25/worktree';
import { indexWorktreeDense, loadEmbeddingModel, releaseEmbeddingModel, retrieveDense } from '../../lib/retrievers/dense';
import { fixtureModel } from '../fixtures/retrievers/dense-fixture';
import type { EvaluationResult } from '../../schemas/evaluation';
import type { WorkflowProgress } from '../../schemas/progress';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo, type FixtureInstance } from '../support/fixture-repos';
import { reply, startScriptedOpenAiServer, type ChatRequestBody, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-eval-it-'));
const mirrors = path.join(work, 'mirrors');
const dataDir = path.join(work, 'runs');
const taskQueue = uniqueTaskQueue('eval-it');
const instancesPath = path.join(work, 'instances.jsonl');
const trajectoriesPath = path.join(work, 'trajectories.jsonl');
const predictionsPath = path.join(work, 'locagent.jsonl');
const runId = 'eval-it';
let stopWorker: () => Promise<void>;
let instances: FixtureInstance[];
let llm: ScriptedOpenAiServer;
let modelDir: string;

type Message = { role: string; content?: unknown };
const userText = (body: ChatRequestBody) => String((body.messages as Message[]).find((m) => m.role === 'user')?.content ?? '');
const turnOf = (body: ChatRequestBody) => (body.messages as Message[]).filter((m) => m.role === 'assistant').length;

/**
 * The served "models": grep-agent answers in CodeGrep's format (instance 1 after a turn with two tool calls,
 * instance 2 at once); scout-agent calls CodeScout's localization_finish (instance 1 after one terminal call).
 */
function script(body: ChatRequestBody) {
  if (body.model === 'locked') return reply.error(401);
  const gears = userText(body).includes('Gear.circumference');
  const turn = turnOf(body);
  if (body.model === 'grep-agent') {
    if (gears && turn === 0) {
      return reply.toolCalls(
        [
          { name: 'grep', arguments: { pattern: 'def circumference' } },
          { name: 'glob', arguments: { pattern: 'widgets/*.py' } },
        ],
        { usage: { prompt_tokens: 500, completion_tokens: 40 } },
      );
    }
    if (gears) {
      return reply.text(
        '<answer>{"files": ["widgets/gears.py"], "line_ranges": [{"file": "widgets/gears.py", "start": 9, "end": 15}]}</answer>',
        {
          usage: { prompt_tokens: 900, completion_tokens: 30 },
        },
      );
    }
    return reply.text('<answer>{"files": ["widgets/belts.py", "widgets/gears.py"]}</answer>', {
      usage: { prompt_tokens: 400, completion_tokens: 20 },
    });
  }
  if (gears && turn === 0) return reply.toolCalls([{ name: 'terminal', arguments: { command: "rg -n 'def mesh' widgets" } }]);
  const locations = gears
    ? [
        { file: 'widgets/gears.py', class_name: 'Gear', function_name: 'circumference' },
        { file: 'widgets/gears.py', function_name: 'mesh' },
      ]
    : [{ file: 'widgets/belts.py', function_name: 'belt_length' }];
  return reply.toolCalls([{ name: 'localization_finish', arguments: { locations } }]);
}

beforeAll(async () => {
  instances = buildFixtureRepo(work, mirrors);
  writeFileSync(instancesPath, instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesPath, '');
  writeFileSync(
    predictionsPath,
    [
      {
        instance_id: 'acme__widgets-1',
        found_files: ['widgets/gears.py', 'tests/test_gears.py', 'widgets/__init__.py'],
        found_entities: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:Gear.size'],
      },
      {
        instance_id: 'acme__widgets-2',
        found_files: ['widgets/gears.py', 'widgets/belts.py'],
        found_entities: ['widgets/belts.py:belt_length'],
      },
    ]
      .map((line) => JSON.stringify(line))
      .join('\n') + '\n',
  );
  modelDir = (await fixtureModel('tiny')).modelDir;
  llm = await startScriptedOpenAiServer({ script });
  ({ stop: stopWorker } = await startWorker(taskQueue));
});
afterAll(async () => {
  await stopWorker?.();
  await llm?.close();
  rmSync(work, { recursive: true, force: true });
});

function config(extra: Record<string, unknown> = {}) {
  return {
    runId,
    dataDir,
    inputs: { trajectories: trajectoriesPath, instances: instancesPath },
    environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
    evaluation: {
      retrievers: [
        { name: 'bm25', kind: 'bm25' },
        { name: 'dense', kind: 'dense', modelDir },
        { name: 'locagent', kind: 'predictions', path: predictionsPath, k: 2 },
        { name: 'grep-agent', kind: 'agent', baseUrl: llm.baseUrl, model: 'grep-agent', answerFormat: 'codegrep' },
        { name: 'scout-agent', kind: 'agent', baseUrl: llm.baseUrl, model: 'scout-agent', answerFormat: 'codescout' },
      ],
      shardSize: 1,
      bootstrap: { samples: 200, seed: 7 },
    },
    ...extra,
  };
}

type Row = Record<string, unknown>;
const rowOf = (rows: Row[], retriever: string, instanceId: string) => {
  const row = rows.find((r) => r.retriever === retriever && r.instanceId === instanceId);
  if (!row) throw new Error(`no row for ${retriever} / ${instanceId}`);
  return row;
};

describe('evaluation stage on the real dev server', () => {
  let result: EvaluationResult;
  let metrics: Row[];
  let predictions: Row[];
  let samples: Row[];

  it('runs after the environment stage and evaluates five retrievers in retriever × shard activities', async () => {
    const { client, close } = await testClient();
    try {
      const environment: PipelineResult = await client.workflow.execute('pipeline', {
        taskQueue,
        workflowId: `${runId}/pipeline`,
        args: [{ ...config(), stages: ['catm', 'environment'] }],
      });
      expect(environment.outcomes.map((o) => o.status)).toEqual(['completed', 'completed']);
      samples = await readParquetObjects(environment.environment!.samples.uri);

      const started = Date.now();
      const handle = await client.workflow.start('evaluation', { taskQueue, workflowId: `${runId}/evaluation`, args: [config()] });
      result = await handle.result();
      console.log(`evaluation: 5 retrievers × 2 shards in ${Date.now() - started} ms`);
      const progress = await handle.query<WorkflowProgress>('progress');
      expect(progress.done).toBe(true);
      expect(progress.stages.predict).toMatchObject({ status: 'completed', progress: { done: 10, total: 10, unit: 'shards' } });
      expect(progress.stages.predict!.note).toBe('10 of 10 shards (0 cached)');
    } finally {
      await close();
    }
    expect(result.shards).toEqual({ total: 10, cached: 0, computed: 10, failed: 0 });
    expect(result.outputDir).toBe(path.join(dataDir, runId, 'evaluation'));
    metrics = await readParquetObjects(result.metrics.uri);
    predictions = await readParquetObjects(result.predictions.uri);
    expect(metrics).toHaveLength(10);
    expect(predictions).toHaveLength(10);
  });

  it('BM25 top-2 is App. E BM25 over the worktree, and its scores are the hand-computed ones', async () => {
    for (const sample of samples) {
      const index = await indexWorktree(sample.worktreePath as string);
      const expected = retrieveTopK(index, sample.problemStatement as string, 5).map((r) => r.path);
      const row = rowOf(predictions, 'bm25', sample.instanceId as string);
      expect(row.ranked).toEqual(expected);
      expect(row.files).toEqual(expected.slice(0, 2));
    }
    // By hand, with App. E's tokenizer (strip characters outside [a-zA-Z0-9_./], keep tokens of 2+ characters):
    // instance 1's query tokens are gear.circumference, is, wrong, and, mesh, divides, by, zero, for, gear,
    // without, teeth. ("mesh()" → mesh, but the code has "mesha" from "mesh(a,"; "teeth." keeps its dot). The
    // only shared token is "gear", in all three files, so the shortest document wins: __init__.py (4 tokens),
    // then tests/test_gears.py (9), then gears.py. Gold {gears.py}: nothing in the top 2, found at rank 3.
    expect(rowOf(predictions, 'bm25', 'acme__widgets-1').ranked).toEqual([
      'widgets/__init__.py',
      'tests/test_gears.py',
      'widgets/gears.py',
    ]);
    expect(rowOf(metrics, 'bm25', 'acme__widgets-1')).toMatchObject({
      filePrecision: 0,
      fileRecall: 0,
      fileFBeta: 0,
      fileF1: 0,
      accAt1: 0,
      accAt3: 1,
      accAt5: 1,
      moduleF1: null,
      turns: null,
      failed: false,
    });
    // Instance 2's tokens (belt_length, ignores, the, pulley, circumference.) match no token of any file
    // ("belt_length(a," is "belt_lengtha"): every score is 0, and App. E's fallback returns files in insertion
    // (path) order. belts.py is third.
    expect(rowOf(predictions, 'bm25', 'acme__widgets-2').ranked).toEqual([
      'tests/test_gears.py',
      'widgets/__init__.py',
      'widgets/belts.py',
      'widgets/gears.py',
    ]);
    expect(rowOf(metrics, 'bm25', 'acme__widgets-2')).toMatchObject({ fileFBeta: 0, accAt1: 0, accAt3: 1, accAt5: 1 });
  });

  it('the dense retriever ranks what lib/retrievers/dense ranks with the same model', async () => {
    const model = await loadEmbeddingModel(modelDir);
    try {
      for (const sample of samples) {
        const index = await indexWorktreeDense(sample.worktreePath as string, sample.baseCommit as string, model);
        const expected = (await retrieveDense(index, sample.problemStatement as string, 5)).map((h) => h.path);
        expect(rowOf(predictions, 'dense', sample.instanceId as string).ranked).toEqual(expected);
        expect(rowOf(predictions, 'dense', sample.instanceId as string).files).toEqual(expected.slice(0, 2));
      }
    } finally {
      await releaseEmbeddingModel(model);
    }
  });

  it('scores the predictions file at three levels and Acc@k, by hand', () => {
    // Instance 1: top-2 files {gears, test_gears} vs {gears}: P 1/2, R 1. Modules derived from the entities:
    // {gears:Gear} = gold. Functions {Gear.circumference, Gear.size} vs {Gear.circumference, mesh}: 1/2, 1/2.
    const one = rowOf(metrics, 'locagent', 'acme__widgets-1');
    expect(one).toMatchObject({
      filePrecision: 0.5,
      fileRecall: 1,
      moduleF1: 1,
      functionPrecision: 0.5,
      functionRecall: 0.5,
      functionF1: 0.5,
      accAt1: 1,
      accAt3: 1,
      accAt5: 1,
    });
    // Instance 2: {gears, belts} vs {belts}; no class → no modules on either side (F1 1); belt_length found.
    const two = rowOf(metrics, 'locagent', 'acme__widgets-2');
    expect(two).toMatchObject({ filePrecision: 0.5, fileRecall: 1, moduleF1: 1, functionF1: 1, accAt1: 0, accAt3: 1, accAt5: 1 });
    expect(rowOf(predictions, 'locagent', 'acme__widgets-1').ranked).toEqual([
      'widgets/gears.py',
      'tests/test_gears.py',
      'widgets/__init__.py',
    ]);
  });

  it('runs the agent retrievers against the endpoint with real tools, and scores answers, line ranges and locations', () => {
    const gold = samples.find((s) => s.instanceId === 'acme__widgets-1')!;
    // The two hunks of gold patch 1 with git's three lines of context: 9..15 and 18..22.
    expect(gold.gold_line_ranges).toEqual([
      { path: 'widgets/gears.py', start: 9, end: 15 },
      { path: 'widgets/gears.py', start: 18, end: 22 },
    ]);
    // The grep tool ran in the worktree: its observation reached the model.
    const second = llm.requests.find((r) => r.body?.model === 'grep-agent' && turnOf(r.body) === 1)!;
    expect(JSON.stringify(second.body!.messages)).toContain('def circumference(self, module):');

    // grep-agent, instance 1: files exact; one of two gold ranges matched → P 1, R 1/2 → Fβ 5/6.
    const g1 = rowOf(metrics, 'grep-agent', 'acme__widgets-1');
    expect(g1).toMatchObject({ fileFBeta: 1, fileF1: 1, turns: 2, toolCalls: 2, accAt1: null, moduleF1: null });
    expect(g1.lineRangeFBeta).toBeCloseTo(5 / 6, 12);
    // Instance 2: {belts, gears} vs {belts}; no ranges against one gold range → 0; answered in 1 turn.
    const g2 = rowOf(metrics, 'grep-agent', 'acme__widgets-2');
    expect(g2).toMatchObject({ filePrecision: 0.5, fileRecall: 1, lineRangeFBeta: 0, turns: 1, toolCalls: 0 });
    expect(rowOf(predictions, 'grep-agent', 'acme__widgets-1')).toMatchObject({
      promptTokens: 1400,
      completionTokens: 70,
      answerValid: true,
      endReason: 'answer',
    });

    // scout-agent: every level exact for both instances.
    for (const id of ['acme__widgets-1', 'acme__widgets-2']) {
      expect(rowOf(metrics, 'scout-agent', id)).toMatchObject({ fileF1: 1, moduleF1: 1, functionF1: 1, lineRangeFBeta: null });
    }
    expect(rowOf(predictions, 'scout-agent', 'acme__widgets-1')).toMatchObject({
      modules: ['widgets/gears.py:Gear'],
      functions: ['widgets/gears.py:Gear.circumference', 'widgets/gears.py:mesh'],
      turns: 2,
    });
  });

  it('summarises in the CodeGrep Table 2 and CodeScout Table 3 layouts, in summary.json, report.md and a self-contained report.html', () => {
    const byName = Object.fromEntries(result.summaryValues.retrievers.map((r) => [r.name, r]));
    // grep-agent: Fβ (1 + 5/9)/2 = 7/9; P (1 + 1/2)/2; R 1; one of two ≥ 0.8; turns (2 + 1)/2.
    expect(byName['grep-agent']!.table2.fBetaMean.value).toBeCloseTo(7 / 9, 12);
    expect(byName['grep-agent']!.table2).toMatchObject({
      precision: { value: 0.75 },
      recall: { value: 1 },
      shareHighQuality: { value: 0.5 },
      turns: 1.5,
    });
    expect(byName['locagent']!.accuracyAtK!.map((a) => a.value.value)).toEqual([0.5, 1, 1]);
    expect(byName['locagent']!.table3.function!.f1.value).toBeCloseTo(0.75, 12);
    expect(byName['bm25']!.table3.module).toBeNull();

    const md = readFileSync(result.report.markdown, 'utf8');
    expect(md).toContain('| grep-agent | 0.778 | 0.778 | 0.750 | 1.000 | 50.0% | 1.5 |');
    expect(md).toContain('| scout-agent | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 | 100.00 |');
    expect(md).toContain('| locagent | 66.67 | 50.00 | 100.00 | 100.00 | 100.00 | 100.00 | 75.00 | 75.00 | 75.00 |');
    expect(md).toContain('| locagent | 50.0% | 100.0% | 100.0% |');
    expect(md).toContain('| bm25 | 0.000 | 0.000 | 0.000 | 0.000 | 0.0% | – |');
    expect(md).toContain('| bm25 | 0.0% | 100.0% | 100.0% |');

    const html = readFileSync(result.report.html, 'utf8');
    expect(html).toContain('<td class="left">grep-agent</td><td class="right">0.778</td>');
    expect(html.match(/<svg /g)).toHaveLength(10);
    expect(html).not.toMatch(/<script|<link|src=/i);
    expect(JSON.parse(readFileSync(result.summary.uri, 'utf8'))).toEqual(result.summaryValues);
  });

  it('a rerun is a cache hit for every shard: no retriever runs again and the endpoint is not asked', async () => {
    const requestsBefore = llm.requests.length;
    const shardFiles = () =>
      (readdirSync(path.join(result.outputDir, 'shards'), { recursive: true }) as string[])
        .filter((f) => f.endsWith('.parquet'))
        .map((f) => path.join(result.outputDir, 'shards', f))
        .sort();
    const before = shardFiles().map((f) => [f, statSync(f).mtimeMs]);
    expect(before).toHaveLength(10);
    const { client, close } = await testClient();
    let again: EvaluationResult;
    try {
      again = await client.workflow.execute('evaluation', { taskQueue, workflowId: `${runId}/evaluation-again`, args: [config()] });
    } finally {
      await close();
    }
    expect(again.shards).toEqual({ total: 10, cached: 10, computed: 0, failed: 0 });
    expect(llm.requests.length).toBe(requestsBefore);
    expect(again.metrics).toEqual(result.metrics);
    expect(shardFiles().map((f) => [f, statSync(f).mtimeMs])).toEqual(before);
  });

  it('keeps the other retrievers when one fails, scores an instance without prediction as failed, and evaluates a subset', async () => {
    const partial = path.join(work, 'partial.jsonl');
    writeFileSync(partial, `${JSON.stringify({ instance_id: 'acme__widgets-1', found_files: ['widgets/gears.py'] })}\n`);
    const { client, close } = await testClient();
    let subset: EvaluationResult;
    try {
      subset = await client.workflow.execute('evaluation', {
        taskQueue,
        workflowId: `${runId}/evaluation-subset`,
        args: [
          config({
            evaluation: {
              retrievers: [
                { name: 'partial', kind: 'predictions', path: partial },
                { name: 'locked-agent', kind: 'agent', baseUrl: llm.baseUrl, model: 'locked', answerFormat: 'codegrep' },
              ],
              instances: ['acme__widgets-2'],
              bootstrap: { samples: 50 },
              outputPerRun: true,
            },
          }),
        ],
      });
    } finally {
      await close();
    }
    expect(subset.summaryValues.instances).toBe(1);
    expect(subset.summaryValues.excluded).toEqual({ withoutGroundTruth: 0, notSelected: 1 });
    // The refused API key fails that retriever's shard at once (no retry), and only that retriever.
    expect(subset.shards).toEqual({ total: 2, cached: 0, computed: 1, failed: 1 });
    expect(subset.summaryValues.failedRetrievers).toHaveLength(1);
    expect(subset.summaryValues.failedRetrievers[0]!.name).toBe('locked-agent');
    expect(subset.summaryValues.failedRetrievers[0]!.reason).toContain('refused the API key');
    expect(llm.requests.filter((r) => r.body?.model === 'locked')).toHaveLength(1);
    // The predictions file has no line for instance 2: a failed instance, scored as predicting nothing.
    const [row] = await readParquetObjects(subset.metrics.uri);
    expect(row).toMatchObject({ retriever: 'partial', instanceId: 'acme__widgets-2', failed: true, fileFBeta: 0 });
    expect(subset.summaryValues.retrievers.map((r) => [r.name, r.failed])).toEqual([['partial', 1]]);
    const md = readFileSync(subset.report.markdown, 'utf8');
    expect(md).toContain('- **locked-agent**: agent retriever "locked-agent" on instance acme__widgets-2: LLM endpoint');
    // outputPerRun: this execution's own folder.
    expect(path.dirname(subset.outputDir)).toBe(path.join(dataDir, runId, 'evaluation'));
  });

  it('fails at once, naming them, when evaluation.instances lists ids that are not samples', async () => {
    const { client, close } = await testClient();
    try {
      const run = client.workflow.execute('evaluation', {
        taskQueue,
        workflowId: `${runId}/evaluation-unknown`,
        args: [config({ evaluation: { retrievers: [{ name: 'bm25', kind: 'bm25' }], instances: ['acme__widgets-1', 'nope-9'] } })],
      });
      // WorkflowFailedError ← ActivityFailure (planEvaluation) ← the non-retryable ApplicationFailure.
      await expect(run).rejects.toMatchObject({
        cause: {
          cause: {
            type: 'InvalidInput',
            message: expect.stringContaining('evaluation.instances: nope-9 are not samples with ground truth'),
          },
        },
      });
    } finally {
      await close();
    }
  });
});
