import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ScheduleNotFoundError } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify as toYaml } from 'yaml';
import { findEvaluationReports } from '../../cli/report';
import { checkScheduleName, prepareScheduledConfig } from '../../cli/schedule';
import type { EvaluationResult } from '../../schemas/evaluation';
import type { PipelineResult } from '../../workflows/pipeline';
import { buildFixtureRepo } from '../support/fixture-repos';
import { repoRoot } from '../support/repo-root';
import { startWorker, temporalAddress, testClient, uniqueTaskQueue } from '../support/temporal';

const execFileAsync = promisify(execFile);
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-schedule-it-'));
const mirrors = path.join(work, 'mirrors');
const taskQueue = uniqueTaskQueue('schedule-it');
const runId = 'sched-it';
const scheduleName = `nightly-${taskQueue.slice(-8)}`;
const configFile = path.join(work, 'eval.yaml');
let stopWorker: () => Promise<void>;

/** The real `codegrep` CLI in a child process, pointed at the test server and this file's task queue. */
async function codegrep(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const { stdout, stderr } = await execFileAsync(process.execPath, ['--import', 'tsx', path.join(repoRoot, 'cli/main.ts'), ...args], {
      // The project root: `--import tsx` resolves from here. Every path the test passes is absolute.
      cwd: repoRoot,
      env: { ...process.env, CODEGREP_TEMPORAL_ADDRESS: temporalAddress(), CODEGREP_TASK_QUEUE: taskQueue },
    });
    return { code: 0, out: stdout + stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: e.code ?? 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` };
  }
}

async function eventually<T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: last ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

beforeAll(async () => {
  const instances = buildFixtureRepo(work, mirrors);
  writeFileSync(path.join(work, 'instances.jsonl'), instances.map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(path.join(work, 'trajectories.jsonl'), '');
  writeFileSync(
    path.join(work, 'outside.jsonl'),
    `${JSON.stringify({ instance_id: 'acme__widgets-1', found_files: ['widgets/gears.py'] })}\n${JSON.stringify({ instance_id: 'acme__widgets-2', found_files: ['widgets/belts.py'] })}\n`,
  );
  // Paths relative to the config file, as a user writes them.
  writeFileSync(
    configFile,
    toYaml({
      runId,
      dataDir: 'runs',
      inputs: { trajectories: 'trajectories.jsonl', instances: 'instances.jsonl' },
      environment: { repoSource: { kind: 'mirror-dir', dir: 'mirrors' } },
      evaluation: {
        retrievers: [
          { name: 'bm25', kind: 'bm25' },
          { name: 'outside', kind: 'predictions', path: 'outside.jsonl' },
        ],
        bootstrap: { samples: 100 },
      },
    }),
  );
  ({ stop: stopWorker } = await startWorker(taskQueue));
  const { client, close } = await testClient();
  try {
    const environment: PipelineResult = await client.workflow.execute('pipeline', {
      taskQueue,
      workflowId: `${runId}/pipeline`,
      args: [
        {
          runId,
          dataDir: path.join(work, 'runs'),
          stages: ['catm', 'environment'],
          inputs: { trajectories: path.join(work, 'trajectories.jsonl'), instances: path.join(work, 'instances.jsonl') },
          environment: { repoSource: { kind: 'mirror-dir', dir: mirrors } },
        },
      ],
    });
    expect(environment.outcomes.map((o) => o.status)).toEqual(['completed', 'completed']);
  } finally {
    await close();
  }
});
afterAll(async () => {
  await stopWorker?.();
  rmSync(work, { recursive: true, force: true });
});

describe('codegrep schedule on the real dev server', () => {
  it('create (paused) → list → trigger runs an evaluation → pause / unpause → delete', async () => {
    const { client, close } = await testClient();
    try {
      const created = await codegrep(
        'schedule',
        'create',
        scheduleName,
        '--config',
        configFile,
        '--cron',
        '0 3 * * *',
        '--catchup-window',
        '1h',
        '--paused',
        '--note',
        'made by the test',
      );
      expect(created.out).toContain(`schedule ${scheduleName} created (paused)`);
      expect(created.code).toBe(0);

      const handle = client.schedule.getHandle(scheduleName);
      const described = await handle.describe();
      expect(described.state).toMatchObject({ paused: true, note: 'made by the test' });
      expect(described.policies).toMatchObject({ overlap: 'SKIP', catchupWindow: 3_600_000, pauseOnFailure: true });
      expect(described.action).toMatchObject({
        type: 'startWorkflow',
        workflowType: 'evaluation',
        taskQueue,
        workflowId: `${runId}/evaluation`,
      });
      const scheduledConfig = described.action.args![0] as {
        evaluation: { outputPerRun: boolean; retrievers: { path?: string }[] };
        runDir: string;
      };
      expect(scheduledConfig.evaluation.outputPerRun).toBe(true);
      expect(scheduledConfig.evaluation.retrievers[1]!.path).toBe(path.join(work, 'outside.jsonl'));
      expect(scheduledConfig.runDir).toBe(path.join(work, 'runs', runId));
      // The cron line: every day at 03:00 UTC.
      const first = described.info.nextActionTimes[0]!;
      expect([first.getUTCHours(), first.getUTCMinutes(), first.getUTCSeconds()]).toEqual([3, 0, 0]);
      expect(described.info.nextActionTimes[1]!.getTime() - first.getTime()).toBe(24 * 3600_000);

      // List is served by the visibility store, which lags a little behind create.
      const names = async () => {
        const found: string[] = [];
        for await (const summary of client.schedule.list()) found.push(summary.scheduleId);
        return found;
      };
      await eventually(names, (found) => found.includes(scheduleName), 'the schedule in the visibility store');
      const listed = await codegrep('schedule', 'list');
      const line = listed.out.split('\n').find((l) => l.startsWith(scheduleName))!;
      expect(line).toContain('paused');
      expect(line).toContain('evaluation');
      expect(line).toContain('0 3 * * *');
      expect(line).toContain('note: made by the test');

      // trigger runs the action at once, paused or not.
      expect((await codegrep('schedule', 'trigger', scheduleName)).code).toBe(0);
      const withRun = await eventually(
        () => handle.describe(),
        (d) => d.info.recentActions.length > 0,
        'the triggered run',
      );
      const workflowId = withRun.info.recentActions[0]!.action.workflow.workflowId;
      expect(workflowId.startsWith(`${runId}/evaluation-`)).toBe(true);
      const result: EvaluationResult = await client.workflow.getHandle(workflowId).result();
      // Its own folder per execution: evaluation/<start time>/.
      expect(path.dirname(result.outputDir)).toBe(path.join(work, 'runs', runId, 'evaluation'));
      expect(path.basename(result.outputDir)).toMatch(/^\d{8}T\d{6}Z$/);
      expect(existsSync(result.report.html)).toBe(true);
      const outside = result.summaryValues.retrievers.find((r) => r.name === 'outside')!;
      expect(outside.table2.fBetaMean.value).toBe(1);

      // `codegrep report` prints the newest report: this scheduled run's.
      const report = await codegrep('report', runId, '--data-dir', path.join(work, 'runs'));
      expect(report.code).toBe(0);
      expect(report.out).toContain('| outside | 1.000 | 1.000 | 1.000 | 1.000 | 100.0% | – |');
      expect(report.out).toContain(result.report.html);
      expect(findEvaluationReports(path.join(work, 'runs', runId)).map((r) => r.html)).toEqual([result.report.html]);
      expect(readFileSync(result.report.markdown, 'utf8')).toContain('| outside |');

      expect((await codegrep('schedule', 'unpause', scheduleName, '--note', 'nightly from now on')).code).toBe(0);
      const active = await handle.describe();
      expect(active.state).toMatchObject({ paused: false, note: 'nightly from now on' });
      // Active: the next run is the next 03:00 UTC.
      const next = active.info.nextActionTimes[0]!;
      expect([next.getUTCHours(), next.getUTCMinutes(), next.getUTCSeconds()]).toEqual([3, 0, 0]);
      expect(next.getTime() - Date.now()).toBeLessThanOrEqual(24 * 3600_000);

      expect((await codegrep('schedule', 'pause', scheduleName, '--note', 'checkpoint under review')).code).toBe(0);
      expect((await handle.describe()).state).toMatchObject({ paused: true, note: 'checkpoint under review' });

      expect((await codegrep('schedule', 'delete', scheduleName)).code).toBe(0);
      await expect(handle.describe()).rejects.toBeInstanceOf(ScheduleNotFoundError);
      const gone = await codegrep('schedule', 'pause', scheduleName);
      expect(gone.code).toBe(1);
      expect(gone.out).toContain(`no schedule named "${scheduleName}"`);
      await eventually(names, (found) => !found.includes(scheduleName), 'the schedule gone from the list');
    } finally {
      await close();
    }
  });

  it('refuses a bad schedule before connecting or creating anything', async () => {
    const noSpec = await codegrep('schedule', 'create', 'no-spec', '--config', configFile);
    expect(noSpec.code).toBe(1);
    expect(noSpec.out).toContain('needs --cron');
    expect(() => checkScheduleName('../x')).toThrow(/schedule name "\.\.\/x"/);
    const missing = path.join(work, 'missing.yaml');
    writeFileSync(
      missing,
      toYaml({
        inputs: { trajectories: 'trajectories.jsonl', instances: 'instances.jsonl' },
        evaluation: { retrievers: [{ name: 'x', kind: 'predictions', path: 'nope.jsonl' }] },
      }),
    );
    expect(() => prepareScheduledConfig(missing, 'bad-path')).toThrow(/evaluation\.retrievers\.0\.path: predictions file .*nope\.jsonl/);
    const { client, close } = await testClient();
    try {
      await expect(client.schedule.getHandle('no-spec').describe()).rejects.toBeInstanceOf(ScheduleNotFoundError);
    } finally {
      await close();
    }
  });
});
