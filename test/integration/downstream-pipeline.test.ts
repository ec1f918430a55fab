import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { DownstreamRunRecordSchema } from '../../schemas/downstream-config';
import type { PipelineResult } from '../../workflows/pipeline';
import { startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../support/scripted-openai-server';
import { startWorker, testClient, uniqueTaskQueue } from '../support/temporal';
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
    expect(resolved).toEqual(Object.fromEntries(predictions.map((p) => [p.instanceId, (p.files as string[]).length > 0 || p.instanceId === 'acme__calc-3'])));
    expect(readFileSync(downstream.reportMarkdown, 'utf8')).toContain(`bm25: predictions from ${result.evaluation!.predictions.uri} (parquet, retriever bm25).`);
  });
});
