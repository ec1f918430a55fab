import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { portIsFree, startDevServer, type DevServerHandle } from '../../../cli/dev-server';
import { workflowsPath } from '../../../workers/cpu';

/**
 * The downstream workflow continues as new when Temporal suggests it (its lanes stop taking pairs, the
 * continuation plans again and runs only the rest). The shared dev server suggests it at 4,096 events; this file
 * starts its own with the suggestion at 40, so a study of 6 pairs needs several runs. Activities are test functions.
 */
const SUGGEST_AT_EVENTS = 40;
const CONFIGURATIONS = ['baseline', 'bm25'];
const INSTANCES = ['a-1', 'b-2', 'c-3'];

let server: DevServerHandle;
let dataDir: string;
let worker: Worker;
let running: Promise<void>;
let clientConnection: Connection;
let client: Client;
const taskQueue = 'downstream-can';

/** The runs finished so far, `configuration/instance`, in the order they ran; the plan leaves them out. */
const finished: string[] = [];
let plans = 0;

const ref = (name: string) => ({ uri: `file:///run/${name}`, sha256: '0'.repeat(64), rows: 1, schema: name, schemaVersion: 1 });

const mockActivities = {
  validateConfig: async (input: { runId: string }) => ({
    runId: input.runId,
    runDir: `/nonexistent/${input.runId}`,
    recipe: 'codegrep-v3',
    inputs: { trajectories: '/nonexistent/t.jsonl', instances: '/nonexistent/i.jsonl' },
    temporal: { activityTimeouts: {} },
    environment: { repoSource: { kind: 'mirror-dir', dir: '/nonexistent/mirrors' }, cacheDir: '/c' },
    downstream: {
      concurrency: 1,
      agent: { kind: 'builtin' },
      harness: { kind: 'local' },
      configurations: [],
      runTimeoutMs: 60_000,
      bootstrap: { samples: 10, seed: 1, confidence: 0.95 },
    },
  }),
  planDownstream: async () => {
    plans += 1;
    const pairs: [number, number][] = [];
    CONFIGURATIONS.forEach((c, ci) =>
      INSTANCES.forEach((i, ii) => {
        if (!finished.includes(`${c}/${i}`)) pairs.push([ci, ii]);
      }),
    );
    return {
      plan: ref('plan'),
      pending: { configurations: CONFIGURATIONS, instanceIds: INSTANCES, pairs },
      finished: finished.length,
      total: CONFIGURATIONS.length * INSTANCES.length,
      instances: INSTANCES.length,
      warnings: [],
    };
  },
  runDownstreamPair: async (input: { configuration: string; instanceId: string }) => {
    finished.push(`${input.configuration}/${input.instanceId}`);
    return { row: { resolved: true } };
  },
  summarizeDownstream: async () => ({ tableValues: { rows: [{ configuration: 'bm25', resolveRate: 1 }] } }),
};

beforeAll(async () => {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-can-'));
  let port = 18233;
  while (!(await portIsFree(port))) port += 1;
  server = await startDevServer({
    dataDir,
    port,
    ui: false,
    dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': SUGGEST_AT_EVENTS },
  });
  const connection = await NativeConnection.connect({ address: server.address });
  worker = await Worker.create({ connection, namespace: 'codegrep', taskQueue, workflowsPath, activities: mockActivities });
  running = worker.run();
  clientConnection = await Connection.connect({ address: server.address });
  client = new Client({ connection: clientConnection, namespace: 'codegrep' });
});

afterAll(async () => {
  worker?.shutdown();
  await running;
  await clientConnection?.close();
  await server?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('downstream continue-as-new', () => {
  it('continues as new when suggested, runs every pair exactly once across its runs, then summarizes', async () => {
    const handle = await client.workflow.start('downstream', { taskQueue, workflowId: 'can-run/downstream', args: [{ runId: 'can-run' }] });
    const result = (await handle.result()) as { pairs: number; reusedBeforeStart: number };
    expect([...finished].sort()).toEqual(CONFIGURATIONS.flatMap((c) => INSTANCES.map((i) => `${c}/${i}`)).sort());
    expect(plans).toBeGreaterThan(1); // more than one run planned
    expect(result.pairs).toBe(6);
    expect(result.reusedBeforeStart).toBeGreaterThan(0); // the last run found earlier runs' pairs finished
    const first = await client.workflow.getHandle(handle.workflowId, handle.firstExecutionRunId).fetchHistory();
    expect(first.events!.at(-1)!.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
  });
});
