import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { afterAll, describe, expect, it } from 'vitest';
import { portIsFree, startDevServer, stopDevServer, temporalAnswers } from '../../cli/dev-server';

async function freePort(from: number): Promise<number> {
  for (let port = from; port < from + 300; port++) if (await portIsFree(port)) return port;
  throw new Error('no free port');
}

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-devserver-'));
afterAll(async () => {
  await stopDevServer(dataDir);
  rmSync(dataDir, { recursive: true, force: true });
});

describe('embedded Temporal dev server', () => {
  it('keeps workflow state across a restart (SQLite file) and registers the codegrep search attributes', async () => {
    const port = await freePort(18233);
    const server = await startDevServer({ dataDir, port, ui: false });
    expect(server.startedHere).toBe(true);
    expect(await temporalAnswers(server.address, 'codegrep')).toBe(true);

    let connection = await Connection.connect({ address: server.address });
    let client = new Client({ connection, namespace: 'codegrep' });
    const attributes = await connection.operatorService.listSearchAttributes({ namespace: 'codegrep' });
    expect(Object.keys(attributes.customAttributes ?? {})).toEqual(
      expect.arrayContaining(['CodegrepRun', 'CodegrepStage', 'CodegrepRecipe']),
    );
    // No worker polls this queue, so the workflow simply stays open: enough to prove persistence.
    const handle = await client.workflow.start('pipeline', {
      taskQueue: 'codegrep-dev-server-test',
      workflowId: 'persistence/pipeline',
      args: [{}],
      searchAttributes: { CodegrepRun: ['persistence'] },
    });
    await connection.close();

    await server.stop();
    expect(await temporalAnswers(server.address, 'codegrep', 1_000)).toBe(false);

    const restarted = await startDevServer({ dataDir, port, ui: false });
    expect(restarted.startedHere).toBe(true);
    connection = await Connection.connect({ address: restarted.address });
    client = new Client({ connection, namespace: 'codegrep' });
    const description = await client.workflow.getHandle('persistence/pipeline').describe();
    expect(description.runId).toBe(handle.firstExecutionRunId);
    expect(description.status.name).toBe('RUNNING');
    await connection.close();
    await restarted.stop();
  });

  it('names the port when something else holds it', async () => {
    const port = await freePort(18533);
    const blocker = net.createServer().listen(port, '127.0.0.1');
    await new Promise((resolve) => blocker.once('listening', resolve));
    try {
      await expect(startDevServer({ dataDir: path.join(dataDir, 'blocked'), port, ui: false, readyTimeoutMs: 5_000 })).rejects.toThrow(
        new RegExp(`port ${port} is taken`),
      );
    } finally {
      blocker.close();
    }
  });
});
