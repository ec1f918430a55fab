import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { DownstreamRunRecordSchema } from '../../schemas/downstream';
import type { PipelineResult } from '../../workflows/pipeline';
import { startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';
import { historyCounts, type HistoryCounts } from '../support/history';
import { agentScript, buildCalcFixture, pythonWithPytest, type CalcFixture } from './downstream-fixture';

const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-downstream-pipeline-'));
const dataDir = path.join(work, 'runs');
const taskQueue = uniqueTaskQueue('downstream-pipeline');
let fixture: CalcFixture;
let server: ScriptedOpenAiServer;
let stopWorker: () => Promise<void>;

beforeAll(async () => {
  fixture = buildCalcFixture(work);
  server = await startScriptedOpenAiServer({ script: agentScript() });
  ({ stop: stopWorker } = await startWorker(taskQueue));
});
afterAll(async () => {
  await stopWorker?.();
  await server?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('downstream as the last stage of the pipeline', () => {
  it("injects the evaluation stage's BM25 predictions: catm → environment → evaluation → downstream", async () => {
    const runId = 'ds-pipeline';
    const { client, close } = await testClient();
    let result: PipelineResult;
    try {
      result = await client.workflow.execute('pipeline', {
        taskQueue,
        workflowId: `${runId}/pipeline`,
        args: [
          {
            runId,
            dataDir,
            stages: ['catm', 'environment', 'evaluation', 'downstream'],
            inputs: { trajectories: fixture.trajectoriesPath, instances: fixture.instancesPath },
            environment: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors } },
            downstream: {
              // `bm25` names no file: the pipeline hands it the evaluation stage's predictions (its default BM25 top-2).
              configurations: [
                { name: 'baseline', source: 'none' },
                { name: 'bm25', source: 'predictions' },
              ],
              baseline: 'baseline',
              agent: { kind: 'builtin', baseUrl: server.baseUrl, model: 'frozen-coder', maxRounds: 10, maxAttempts: 1 },
              harness: { kind: 'local', interpreter: pythonWithPytest(), testRunner: 'pytest', timeoutMs: 120_000 },
            },
          },
        ],
      });
    } finally {
      await close();
    }
    expect(result.outcomes.map((o) => `${o.stage}:${o.status}${o.reason ? ` ${o.reason}` : ''}`)).toEqual([
      'catm:completed',
      'environment:completed',
      'evaluation:completed',
      'downstream:completed',
    ]);
    const downstream = result.downstream!;
    expect(downstream.pairs).toBe(6);

    // What the agent was shown for bm25 is exactly what the evaluation stage predicted, in its order.
    const predictions = (await readParquetObjects(result.evaluation!.predictions.uri)).filter((p) => p.retriever === 'bm25');
    expect(predictions).toHaveLength(3);
    for (const prediction of predictions) {
      const recordPath = path.join(dataDir, runId, 'downstream', 'runs', 'bm25', `${prediction.instanceId as string}.json`);
      const record = DownstreamRunRecordSchema.parse(JSON.parse(readFileSync(recordPath, 'utf8')));
      expect(record.injection!.files, String(prediction.instanceId)).toEqual(prediction.files);
      expect(record.injection!.hadPrediction).toBe((prediction.files as string[]).length > 0);
    }
    // The scripted agent fixes the bug whenever it is shown files, and on its own only instance 3.
    const rows = await readParquetObjects(downstream.runs.uri);
    const resolved = Object.fromEntries(rows.filter((r) => r.configuration === 'bm25').map((r) => [r.instanceId, r.resolved]));
    expect(resolved).toEqual(
      Object.fromEntries(predictions.map((p) => [p.instanceId, (p.files as string[]).length > 0 || p.instanceId === 'acme__calc-3'])),
    );
    expect(readFileSync(downstream.reportMarkdown, 'utf8')).toContain(
      `bm25: predictions from ${result.evaluation!.predictions.uri} (parquet, retriever bm25).`,
    );
  });
});

describe('history bounds of evaluation and downstream under a pipeline (README "History bounds")', () => {
  it("the pipeline's event count does not depend on the number of evaluation shards or downstream pairs; the stages' own histories grow only per activity", async () => {
    const { client, close } = await testClient();
    const sizes = {
      small: { retrievers: [{ name: 'bm25', kind: 'bm25', k: 2 }], shardSize: 25, configurations: [{ name: 'baseline', source: 'none' }] },
      large: {
        retrievers: [
          { name: 'bm25', kind: 'bm25', k: 2 },
          { name: 'bm25-k1', kind: 'bm25', k: 1 },
          { name: 'bm25-k3', kind: 'bm25', k: 3 },
          { name: 'bm25-k4', kind: 'bm25', k: 4 },
        ],
        shardSize: 1,
        configurations: [
          { name: 'baseline', source: 'none' },
          { name: 'bm25', source: 'predictions' },
          { name: 'again-a', source: 'none' },
          { name: 'again-b', source: 'none' },
        ],
      },
    };
    const seen: Record<
      string,
      { pipeline: HistoryCounts; evaluation: HistoryCounts; downstream: HistoryCounts; shards: number; pairs: number }
    > = {};
    try {
      for (const [size, { retrievers, shardSize, configurations }] of Object.entries(sizes)) {
        const runId = `ds-history-${size}`;
        // Evaluation and downstream only: the environment stage's samples come from the run above.
        cpSync(path.join(dataDir, 'ds-pipeline', 'environment'), path.join(dataDir, runId, 'environment'), { recursive: true });
        const result: PipelineResult = await client.workflow.execute('pipeline', {
          taskQueue,
          workflowId: `${runId}/pipeline`,
          args: [
            {
              runId,
              dataDir,
              stages: ['evaluation', 'downstream'],
              inputs: { trajectories: fixture.trajectoriesPath, instances: fixture.instancesPath },
              environment: { repoSource: { kind: 'mirror-dir', dir: fixture.mirrors } },
              evaluation: { retrievers, shardSize },
              downstream: {
                configurations,
                baseline: 'baseline',
                agent: { kind: 'builtin', baseUrl: server.baseUrl, model: 'frozen-coder', maxRounds: 10, maxAttempts: 1 },
                harness: { kind: 'local', interpreter: pythonWithPytest(), testRunner: 'pytest', timeoutMs: 120_000 },
              },
            },
          ],
        });
        expect(result.outcomes.map((o) => o.status)).toEqual(['completed', 'completed']);
        seen[size] = {
          pipeline: await historyCounts(client, `${runId}/pipeline`),
          evaluation: await historyCounts(client, `${runId}/evaluation`),
          downstream: await historyCounts(client, `${runId}/downstream`),
          shards: result.evaluation!.shards.total,
          pairs: result.downstream!.pairs,
        };
      }
    } finally {
      await close();
    }
    console.log(`history events: ${JSON.stringify(seen)}`);
    const { small, large } = seen as Record<'small' | 'large', (typeof seen)[string]>;
    expect([small.shards, large.shards]).toEqual([1, 12]);
    expect([small.pairs, large.pairs]).toEqual([3, 12]);
    expect(large.pipeline.commandEvents).toBe(small.pipeline.commandEvents);
    for (const run of [small, large])
      for (const h of [run.pipeline, run.evaluation, run.downstream]) expect(h.workflowTaskEvents).toBeLessThanOrEqual(3 * h.commandEvents);
    for (const run of [small, large]) for (const h of [run.pipeline, run.evaluation, run.downstream]) expect(h.signals).toEqual({});
    // workflows/evaluation.ts and downstream.ts: 3 events per activity (scheduled, started, closed) plus its workflow
    // tasks, nothing per second of running.
    expect(large.evaluation.commandEvents - small.evaluation.commandEvents).toBeLessThanOrEqual(3 * (large.shards - small.shards));
    expect(large.downstream.commandEvents - small.downstream.commandEvents).toBeLessThanOrEqual(3 * (large.pairs - small.pairs));
  }, 600_000);
});
