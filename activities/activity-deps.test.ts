import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { readRows } from '../lib/artifacts';
import { policyServerFiles, policyServerLogDir } from '../lib/policy-server';
import { isProcessAlive } from '../lib/process';
import { writePidFile } from '../lib/training/trainer-pid-file';
import { sharedData } from '../test/support/repo-root';
import { reply, startScriptedOpenAiServer, type ScriptedOpenAiServer } from '../test/support/scripted-openai-server';
import { activityDeps, createActivities } from './index';

/**
 * Activities built by `createActivities(deps)` take the worker's environment and this node's data dir from the
 * deps they were built with, never from `process.env` or the process's cwd: what a worker read at start is what
 * they use. Each test runs the real activity (real lib/ code, real files, a real HTTP endpoint) in Temporal's
 * MockActivityEnvironment.
 */

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const undo of cleanup.splice(0).reverse()) await undo();
});

async function tempDir(label: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `codegrep-deps-${label}-`));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Sets an environment variable of this process for one test. */
function setProcessEnv(name: string, value: string): void {
  const before = process.env[name];
  process.env[name] = value;
  cleanup.push(async () => {
    if (before === undefined) delete process.env[name];
    else process.env[name] = before;
  });
}

const run = <T>(activity: () => Promise<T>): Promise<T> => new MockActivityEnvironment({ attempt: 1 }).run(activity) as Promise<T>;

describe('activities built with injected deps', () => {
  it('judge sends the API key of deps.env, not of process.env, and writes under the run dir only', async () => {
    const runDir = path.join(await tempDir('judge'), 'run-1');
    // Three real OpenHands trajectories: enough candidates for a few requests, seconds to mine.
    const lines = readFileSync(path.join(sharedData, 'openhands_trajectories.sample.jsonl'), 'utf8').split('\n');
    const trajectoriesPath = path.join(path.dirname(runDir), 'trajectories.jsonl');
    await writeFile(trajectoriesPath, lines.slice(0, 3).join('\n') + '\n');

    const server: ScriptedOpenAiServer = await startScriptedOpenAiServer({ script: () => reply.text('**RELEVANT**') });
    cleanup.push(() => server.close());
    // The process has a different key under the same name: the activity must not see it.
    setProcessEnv('CODEGREP_DEPS_TEST_KEY', 'key-of-the-process');
    const activities = createActivities(activityDeps({ env: { CODEGREP_DEPS_TEST_KEY: 'key-the-worker-read' } }));

    const mined = await run(() => activities.mine({ runId: 'run-1', runDir, trajectoriesPath }));
    expect(mined.candidates.rows).toBeGreaterThan(0);
    const judged = await run(() =>
      activities.judge({
        runId: 'run-1',
        runDir,
        candidates: mined.candidates,
        instancesPath: path.join(sharedData, 'swebench_verified.jsonl'),
        judge: { mode: 'llm', baseUrl: server.baseUrl, model: 'judge-model', apiKeyEnv: 'CODEGREP_DEPS_TEST_KEY', concurrency: 2 },
      }),
    );

    expect(judged.counts.relevant).toBe(mined.candidates.rows);
    expect(server.requests.length).toBe(mined.candidates.rows);
    expect(new Set(server.requests.map((r) => r.headers.authorization))).toEqual(new Set(['Bearer key-the-worker-read']));
    expect(judged.judgements.uri).toBe(path.join(runDir, 'catm', 'judgements.parquet'));
    let rows = 0;
    for await (const record of readRows(judged.judgements.uri)) if ('row' in record) rows += 1;
    expect(rows).toBe(mined.candidates.rows);
    expect(existsSync(path.join(process.cwd(), 'catm'))).toBe(false);
  });

  it('judge without the key in deps.env sends none, even when the process has it', async () => {
    const runDir = path.join(await tempDir('judge-nokey'), 'run-2');
    const lines = readFileSync(path.join(sharedData, 'openhands_trajectories.sample.jsonl'), 'utf8').split('\n');
    const trajectoriesPath = path.join(path.dirname(runDir), 'trajectories.jsonl');
    await writeFile(trajectoriesPath, lines.slice(0, 1).join('\n') + '\n');
    const server = await startScriptedOpenAiServer({ script: () => reply.text('Verdict: NOT_RELEVANT') });
    cleanup.push(() => server.close());
    setProcessEnv('CODEGREP_DEPS_TEST_KEY', 'key-of-the-process');
    const activities = createActivities(activityDeps());

    const mined = await run(() => activities.mine({ runId: 'run-2', runDir, trajectoriesPath }));
    const judged = await run(() =>
      activities.judge({
        runId: 'run-2',
        runDir,
        candidates: mined.candidates,
        instancesPath: path.join(sharedData, 'swebench_verified.jsonl'),
        judge: { mode: 'llm', baseUrl: server.baseUrl, model: 'judge-model', apiKeyEnv: 'CODEGREP_DEPS_TEST_KEY' },
      }),
    );
    expect(judged.counts.notRelevant).toBe(mined.candidates.rows);
    expect(server.requests.length).toBeGreaterThan(0);
    // lib/llm sends its placeholder when no key is configured.
    expect(server.requests.map((r) => r.headers.authorization)).not.toContain('Bearer key-of-the-process');
  });

  it('reapPolicyServer of a run with a store stops the server recorded under deps.nodeDataDir, not under CODEGREP_DATA_DIR or the run dir', async () => {
    const runId = 'run-3';
    const step = 4;
    const nodeDir = await tempDir('node');
    const envDir = await tempDir('env');
    const runDir = path.join(await tempDir('shared'), runId);
    setProcessEnv('CODEGREP_DATA_DIR', envDir);

    /** A live process in a group of its own, recorded where a policy server of `base` would record itself. */
    const plantServer = async (base: string) => {
      const child = spawn('sleep', ['120'], { detached: true, stdio: 'ignore' });
      child.unref();
      cleanup.push(async () => {
        if (isProcessAlive(child.pid!, null)) process.kill(-child.pid!, 'SIGKILL');
      });
      const { pidFile } = policyServerFiles(policyServerLogDir(base, step));
      await mkdir(path.dirname(pidFile), { recursive: true });
      await writePidFile(pidFile, child.pid!, { segment: 0, attempt: 1 });
      return { pid: child.pid!, pidFile };
    };
    const onNode = await plantServer(path.join(nodeDir, runId));
    const underEnv = await plantServer(path.join(envDir, runId));
    const onShared = await plantServer(runDir);

    const { reapPolicyServer } = createActivities(activityDeps({ nodeDataDir: nodeDir }));
    const reaped = await run(() => reapPolicyServer({ runId, runDir, store: 'file:///unused-store', step }));

    expect(reaped).toEqual({ action: 'terminated', pid: onNode.pid });
    expect(isProcessAlive(onNode.pid, null)).toBe(false);
    expect(existsSync(onNode.pidFile)).toBe(false);
    for (const untouched of [underEnv, onShared]) {
      expect(isProcessAlive(untouched.pid, null)).toBe(true);
      expect(existsSync(untouched.pidFile)).toBe(true);
    }

    // Without a node data dir in its deps, the same activity works in the run dir the workflow names.
    const onSharedDir = createActivities(activityDeps({ nodeDataDir: null }));
    expect(await run(() => onSharedDir.reapPolicyServer({ runId, runDir, store: 'file:///unused-store', step }))).toEqual({
      action: 'terminated',
      pid: onShared.pid,
    });
    expect(isProcessAlive(underEnv.pid, null)).toBe(true);
  });

  it('the run store is reached at the S3 endpoint of deps.env, not at the one process.env names', async () => {
    // Two stand-in S3 endpoints that record what reaches them and answer 503: one named by the process's
    // environment, one by the environment the worker read at start.
    const heard = { process: 0, deps: 0 };
    const endpoint = async (which: keyof typeof heard) => {
      const server = createServer((request, response) => {
        heard[which] += 1;
        request.resume();
        response.writeHead(503).end();
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      cleanup.push(() => new Promise((resolve) => server.close(resolve)));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    };
    const credentials = { AWS_ACCESS_KEY_ID: 'test-key', AWS_SECRET_ACCESS_KEY: 'test-secret' };
    for (const [name, value] of Object.entries(credentials)) setProcessEnv(name, value);
    setProcessEnv('AWS_ENDPOINT_URL_S3', await endpoint('process'));
    const env = { ...credentials, AWS_ENDPOINT_URL_S3: await endpoint('deps'), AWS_MAX_ATTEMPTS: '1', AWS_S3_FORCE_PATH_STYLE: 'true' };
    const runDir = path.join(await tempDir('store'), 'run-s');

    const { inspectTrainingRun } = createActivities(activityDeps({ env }));
    await expect(run(() => inspectTrainingRun({ runDir, runId: 'run-s', store: 's3://codegrep-test/runs' }))).rejects.toThrow();
    expect(heard.deps).toBeGreaterThan(0);
    expect(heard.process).toBe(0);
  });
});
