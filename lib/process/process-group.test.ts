import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startProcessGroup } from './process-group';

const dirs: string[] = [];
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
const env = { PATH: process.env.PATH };

describe('startProcessGroup', () => {
  it('captures output, writes to files, and reports the exit', async () => {
    const chunks: Buffer[] = [];
    const ok = await startProcessGroup('sh', ['-c', 'echo out; echo err >&2; exit 3'], { env, stdout: (c) => chunks.push(c) }).exited;
    expect(ok).toMatchObject({ code: 3, signal: null, stoppedFor: null });
    expect(Buffer.concat(chunks).toString()).toBe('out\n');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'process-group-'));
    dirs.push(dir);
    const files = { stdout: path.join(dir, 'out'), stderr: path.join(dir, 'err') };
    const group = startProcessGroup('sh', ['-c', 'echo out; echo err >&2'], {
      env,
      stdout: { file: files.stdout },
      stderr: { file: files.stderr },
    });
    await group.spawned;
    expect((await group.exited).code).toBe(0);
    expect([readFileSync(files.stdout, 'utf8'), readFileSync(files.stderr, 'utf8')]).toEqual(['out\n', 'err\n']);
  });

  it('a program that cannot start resolves with spawnError', async () => {
    const group = startProcessGroup('/no/such/program', [], { env });
    await expect(group.spawned).rejects.toThrow(/ENOENT/);
    expect((await group.exited).spawnError?.code).toBe('ENOENT');
  });

  it('kills the whole group on timeout and on abort', async () => {
    // The grandchild (sleep) holds the pipe: 'close' only comes once the group kill reached it too.
    const timedOut = await startProcessGroup('sh', ['-c', 'sleep 30 & wait'], { env, stdout: () => undefined, timeoutMs: 200 }).exited;
    expect(timedOut).toMatchObject({ signal: 'SIGKILL', stoppedFor: 'timeout' });
    const controller = new AbortController();
    const group = startProcessGroup('sleep', ['30'], { env, signal: controller.signal });
    await group.spawned;
    controller.abort();
    expect(await group.exited).toMatchObject({ signal: 'SIGKILL', stoppedFor: 'abort' });
  });

  it('stop() sends SIGTERM, then SIGKILL after the grace to a program that ignores it', async () => {
    let forced = '';
    const polite = startProcessGroup('sleep', ['30'], { env, graceMs: 5_000 });
    await polite.spawned;
    polite.stop('target');
    expect(await polite.exited).toMatchObject({ signal: 'SIGTERM', stoppedFor: 'target' });
    const stubborn = startProcessGroup('sh', ['-c', 'trap "" TERM; echo ready; sleep 30 & wait'], {
      env,
      graceMs: 300,
      stdout: () => undefined,
      onForceKill: (reason) => (forced = reason),
    });
    await stubborn.spawned;
    await new Promise((r) => setTimeout(r, 200));
    stubborn.stop('cancelled');
    stubborn.stop('protocol'); // only the first stop counts
    expect(await stubborn.exited).toMatchObject({ signal: 'SIGKILL', stoppedFor: 'cancelled' });
    expect(forced).toBe('cancelled');
  });
});
