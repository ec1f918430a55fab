import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { signalProcessGroup, startProcessGroup } from './process-group';
import { isProcessAlive, processStartTicks } from './proc-stat';

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

  it('escalates SIGTERM to SIGKILL of the whole group: a grandchild that ignores SIGTERM dies too, and a throwing onForceKill does not stop it', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'process-group-'));
    dirs.push(dir);
    const pidFile = path.join(dir, 'grandchild.pid');
    const signals: NodeJS.Signals[] = [];
    const errors: unknown[] = [];
    const onUncaught = (error: unknown) => errors.push(error);
    process.prependListener('uncaughtException', onUncaught);
    try {
      // The leader and its grandchild both ignore SIGTERM, as a rank stuck in a CUDA or NCCL call does.
      const group = startProcessGroup('sh', ['-c', `trap "" TERM; sh -c 'trap "" TERM; echo $$ > ${pidFile}; sleep 30' & wait`], {
        env,
        graceMs: 300,
        signalGroup: (pid, signal) => (signals.push(signal), signalProcessGroup(pid, signal)),
        onForceKill: () => {
          throw new Error('a logger that is gone');
        },
      });
      await group.spawned;
      for (let i = 0; i < 100 && !existsSync(pidFile); i++) await new Promise((r) => setTimeout(r, 50));
      const grandchild = Number(readFileSync(pidFile, 'utf8'));
      const ticks = processStartTicks(grandchild);
      group.stop('cancelled');
      const exit = await group.exited;
      expect(exit).toMatchObject({ signal: 'SIGKILL', stoppedFor: 'cancelled' });
      expect(exit.unkillable).toBeUndefined();
      expect(signals).toEqual(['SIGTERM', 'SIGKILL']);
      for (let i = 0; i < 50 && isProcessAlive(grandchild, ticks); i++) await new Promise((r) => setTimeout(r, 50));
      expect(isProcessAlive(grandchild, ticks)).toBe(false);
    } finally {
      await new Promise((r) => setTimeout(r, 50));
      process.removeListener('uncaughtException', onUncaught);
    }
    expect(errors.map(String)).toEqual(['Error: a logger that is gone']);
  });

  it('a group that SIGKILL does not end (uninterruptible sleep) resolves `exited` with its /proc state instead of hanging', async () => {
    // The stand-in kernel drops SIGTERM and SIGKILL, as for a process in state D: only /proc can tell.
    const group = startProcessGroup('sleep', ['30'], { env, graceMs: 100, killWaitMs: 300, signalGroup: () => true });
    await group.spawned;
    const pid = group.pid!;
    try {
      group.stop('cancelled');
      const exit = await group.exited;
      expect(exit).toMatchObject({ code: null, signal: null, stoppedFor: 'cancelled', unkillable: { pid, state: 'S' } });
      expect(exit.unkillable!.description).toContain('state S');
    } finally {
      signalProcessGroup(pid, 'SIGKILL');
    }
  });
});
