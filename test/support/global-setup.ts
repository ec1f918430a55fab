import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { portIsFree, startDevServer, type DevServerHandle } from '../../cli/dev-server';

declare module 'vitest' {
  export interface ProvidedContext {
    temporalAddress: string;
    temporalDataDir: string;
  }
}

let server: DevServerHandle | undefined;
let dataDir: string | undefined;

async function freePort(from: number): Promise<number> {
  for (let port = from; port < from + 200; port++) if (await portIsFree(port)) return port;
  throw new Error(`no free port in ${from}..${from + 200}`);
}

/** One real Temporal dev server per test run (SQLite file in a temp dir), unless TEST_TEMPORAL_ADDRESS names one. */
export async function setup(project: TestProject): Promise<void> {
  const existing = process.env.TEST_TEMPORAL_ADDRESS;
  if (existing) {
    project.provide('temporalAddress', existing);
    project.provide('temporalDataDir', process.env.TEST_TEMPORAL_DATA_DIR ?? '');
    return;
  }
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-temporal-'));
  const port = await freePort(17233);
  server = await startDevServer({ dataDir, port, ui: false });
  project.provide('temporalAddress', server.address);
  project.provide('temporalDataDir', dataDir);
}

export async function teardown(): Promise<void> {
  await server?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
}
