import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readParquetObjects } from '../../lib/artifacts';
import { pairedMeans } from '../../lib/stats';
import { repoRoot } from '../support/repo-root';
import { temporalAddress, uniqueTaskQueue } from '../support/temporal';

/**
 * `codegrep learn-demo`, the demo's training, as `npm run demo` runs it: the learnable task generated, the grep
 * teacher and the untrained start served, and the pipeline (catm → environment → rft → training → evaluation)
 * run by the command's own in-process workers. The trained checkpoint must beat its start on held-out
 * instances by a paired interval that excludes zero, and nothing the command started may outlive it.
 */
const work = mkdtempSync(path.join(os.tmpdir(), 'codegrep-learn-demo-'));
const runId = 'learn-demo-it';
afterAll(() => rmSync(work, { recursive: true, force: true }));

function learnDemo(): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', path.join(repoRoot, 'cli/main.ts'), 'learn-demo', '--data-dir', path.join(work, 'runs'), '--run-id', runId],
      {
        cwd: repoRoot,
        env: {
          ...process.env,
          CODEGREP_TEMPORAL_ADDRESS: temporalAddress(),
          CODEGREP_TASK_QUEUE: uniqueTaskQueue('learn-demo'),
          CODEGREP_GPU_TASK_QUEUE: uniqueTaskQueue('learn-demo-gpu'),
          OMP_NUM_THREADS: '1',
        },
        timeout: 900_000,
        killSignal: 'SIGKILL',
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Processes whose command line names this test's folder (servers, trainers, the teacher's clients). */
function processesUnder(folder: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmdline.includes(folder)) found.push(`${pid}: ${cmdline}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

describe('codegrep learn-demo', () => {
  it('trains on the learnable task, and its trained checkpoint beats the untrained start on held-out instances', async () => {
    const out = await learnDemo();
    expect(out.code, out.stdout.slice(-4000) + out.stderr.slice(-4000)).toBe(0);
    expect(out.stdout).toContain('stages     catm ✓  ·  environment ✓ (48 samples)  ·  rft ✓  ·  training ✓  ·  evaluation ✓');
    expect(out.stdout).toContain('toy        a toy task on a CPU');
    expect(out.stdout).toMatch(/Learning on the toy task: held-out Fβ start 0\.\d+ → trained 0\.\d+, difference \+0\.\d+ \[/);

    const metrics = await readParquetObjects(path.join(work, 'runs', runId, 'evaluation', 'metrics.parquet'));
    const scores = (name: string) =>
      new Map(metrics.filter((m) => m.retriever === name).map((m) => [String(m.instanceId), Number(m.fileFBeta)]));
    const start = scores('start');
    const trained = scores('trained');
    expect([...start.keys()].sort()).toEqual([...trained.keys()].sort());
    expect(start.size).toBe(16);
    const paired = pairedMeans([...start.keys()].sort(), start, trained, { resamples: 2000, seed: 7 });
    expect(paired.second! - paired.first!).toBeGreaterThanOrEqual(0.3);
    expect(paired.differenceInterval!.low).toBeGreaterThan(0);
    // No held-out instance was trained on: RFT's and RL's instances are the training repositories'.
    const task = JSON.parse(readFileSync(path.join(work, 'runs', 'learn-task', 'task.json'), 'utf8')) as {
      heldOutIds: string[];
      training: { instance_id: string }[];
    };
    expect(task.heldOutIds.filter((id) => task.training.some((t) => t.instance_id === id))).toEqual([]);
    expect([...start.keys()].sort()).toEqual([...task.heldOutIds].sort());

    // The untrained start's server and the trained checkpoint's were both stopped and reaped: no pid record, and
    // no process left that names the run's folders.
    expect(existsSync(path.join(work, 'runs', 'learn-task', 'start-server', 'server.pid.json'))).toBe(false);
    expect(processesUnder(work)).toEqual([]);
  }, 960_000);
});
