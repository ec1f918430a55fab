import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pipelineOutcome } from '../../cli/pipeline-outcome';
import { runLogPath } from '../../cli/run-log';
import { buildFixtureRepo } from '../support/fixture-repos';
import { repoRoot } from '../support/repo-root';
import { temporalAddress, testClient, uniqueTaskQueue } from '../support/temporal';

/**
 * `codegrep run` as a user runs it, with its in-process worker, on a run whose environment stage
 * fails (no mirror of the repository): the pipeline ends Failed in Temporal with every stage's outcome, the
 * command exits 3 with its stage table, the terminal has one line per failure and names the log file, and
 * the SDK's logs are in that file, not on the terminal.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-run-cli-'));
const taskQueue = uniqueTaskQueue('run-cli');
let configFile: string;

beforeAll(() => {
  const instances = buildFixtureRepo(work, path.join(work, 'mirrors'));
  writeFileSync(path.join(work, 'instances.jsonl'), instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(path.join(work, 'trajectories.jsonl'), '');
  configFile = path.join(work, 'offline.json');
  writeFileSync(
    configFile,
    JSON.stringify({
      dataDir: path.join(work, 'runs'),
      stages: ['catm', 'environment', 'evaluation'],
      inputs: { trajectories: path.join(work, 'trajectories.jsonl'), instances: path.join(work, 'instances.jsonl') },
      environment: { repoSource: { kind: 'mirror-dir', dir: path.join(work, 'no-mirrors-here') } },
    }),
  );
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

function codegrep(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return codegrepWithin(180_000, ...args);
}

function codegrepWithin(timeoutMs: number, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(repoRoot, 'cli/main.ts'), ...args],
      {
        cwd: repoRoot,
        env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: temporalAddress(), CODEGREP_TASK_QUEUE: taskQueue },
        timeout: timeoutMs,
        killSignal: 'SIGKILL',
      },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('codegrep run tells the truth about a failed stage', () => {
  it('exits 3 with the stage table, ends Failed in Temporal with every outcome, keeps SDK logs in the named log file', async () => {
    const runId = 'run-cli-offline';
    const out = await codegrep('run', configFile, '--run-id', runId, '--no-embedded');
    const terminal = out.stdout + out.stderr;
    expect(out.code, terminal).toBe(3);
    const logFile = runLogPath(path.join(work, 'runs', runId));
    expect(out.stdout).toContain(`of this run: ${logFile}`);
    expect(out.stdout).toMatch(/\n {2}catm {9}completed\n/);
    expect(out.stdout).toMatch(/\n {2}environment {2}failed: [^\n]*acme\/widgets[^\n]*\n/);
    expect(out.stdout).toContain('  evaluation   skipped: needs environment, which failed');
    // One line per failure, each hint once, and no SDK dumps (task tokens, stack frames) on the terminal.
    expect(terminal.split('environment.repoSource').length - 1).toBe(1);
    expect(terminal).not.toMatch(/taskToken|\n\s+at .+:\d+:\d+/);
    // The log file has the SDK's own lines (the in-process worker's) and the failure's full message.
    expect(existsSync(logFile)).toBe(true);
    const log = readFileSync(logFile, 'utf8');
    expect(log).toMatch(/\[(INFO|WARN)\] /);
    expect(log).toContain('stage environment failed:');

    const { client, close } = await testClient();
    try {
      const handle = client.workflow.getHandle(`${runId}/pipeline`);
      expect((await handle.describe()).status.name).toBe('FAILED');
      const { result, failed } = await pipelineOutcome(handle);
      expect(failed).toBe(true);
      expect(result.outcomes.map((o) => `${o.stage}:${o.status}`)).toEqual(['catm:completed', 'environment:failed', 'evaluation:skipped']);
      expect(result.catm).not.toBeNull();
    } finally {
      await close();
    }
  });

  it("a re-run started right after the last one ended does not trust that run's exited in-process worker: it starts its own and finishes", async () => {
    // The first run's in-process worker polled the queue moments ago and exited with its command: the server still
    // lists it as a poller, which the re-run used to take for a live worker, waiting forever on a workflow nobody ran.
    const first = await codegrep('run', configFile, '--run-id', 'run-cli-rerun-1', '--no-embedded');
    expect(first.code, first.stdout + first.stderr).toBe(3);
    const { client, close } = await testClient();
    try {
      const described = await client.workflowService.describeTaskQueue({
        namespace: 'codegrep',
        taskQueue: { name: taskQueue },
        taskQueueType: 1,
      });
      expect((described.pollers ?? []).length).toBeGreaterThan(0); // the exited worker is still listed
    } finally {
      await close();
    }
    // Without a worker the re-run never ends: 300 s is several times what a run with its own worker takes here.
    const second = await codegrepWithin(300_000, 'run', configFile, '--run-id', 'run-cli-rerun-2', '--no-embedded');
    const terminal = second.stdout + second.stderr;
    expect(second.code, terminal).toBe(3);
    expect(terminal).toContain(`no live worker polls task queue ${taskQueue}; starting one in this process`);
    expect(second.stdout).toMatch(/\n {2}catm {9}completed\n/);
  }, 700_000);

  it("a poller this machine cannot check (another node's, since gone) is trusted at first; the unclaimed workflow task is reported and a worker started", async () => {
    const { client, close } = await testClient();
    try {
      // One short poll under another node's identity: the server lists it as a recent poller. (The frontend refuses a
      // long poll with less than a few seconds left, without recording it.)
      await client
        .withDeadline(Date.now() + 5_000, () =>
          client.workflowService.pollWorkflowTaskQueue({ namespace: 'codegrep', taskQueue: { name: taskQueue }, identity: 'gpu-node-7' }),
        )
        .catch(() => undefined);
      const described = await client.workflowService.describeTaskQueue({
        namespace: 'codegrep',
        taskQueue: { name: taskQueue },
        taskQueueType: 1,
      });
      expect((described.pollers ?? []).map((p) => p.identity)).toContain('gpu-node-7');
    } finally {
      await close();
    }
    const out = await codegrepWithin(300_000, 'run', configFile, '--run-id', 'run-cli-foreign-poller', '--no-embedded');
    const terminal = out.stdout + out.stderr;
    expect(out.code, terminal).toBe(3);
    expect(terminal).not.toContain('no live worker polls task queue');
    expect(terminal).toMatch(
      /no worker has picked up the pipeline's workflow task for \d+ s \(the worker seen polling task queue [^)]+ is not live\); starting one in this process/,
    );
  }, 400_000);
});
