import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findExecutable, sandboxEnv } from '../executables';
import { Semaphore } from '../semaphore';
import { runPipeline } from '../subprocess';
import {
  HELPER_SCRIPT,
  inProcessLauncher,
  pipelineLauncher,
  selectSpawnPath,
  sharedSpawnerHelper,
  SpawnerHelperClient,
  spawnerPython,
} from './index';
import type { PipelineEvents, PipelineSpec } from './launcher';
import { encodeKill, encodeStart, FrameDecoder, type HelperMessage } from './protocol';

const python = spawnerPython();
if (!python) throw new Error('these tests need python3 on PATH (the spawner helper is a Python program)');
const sh = findExecutable('sh')!;
const sleep = findExecutable('sleep')!;
const seq = findExecutable('seq')!;
const head = findExecutable('head')!;
const cat = findExecutable('cat')!;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'codegrep-spawner-'));
});
afterAll(() => {
  selectSpawnPath(undefined);
  rmSync(dir, { recursive: true, force: true });
});

interface Collected {
  stdout: Buffer[];
  stderr: Map<number, string>;
  exits: Map<number, { exitCode: number | null; signal: NodeJS.Signals | null }>;
  spawnErrors: Map<number, string>;
  pids: number[];
}

function collector(onStdout?: (chunk: Buffer) => void): { events: PipelineEvents; got: Collected } {
  const got: Collected = { stdout: [], stderr: new Map(), exits: new Map(), spawnErrors: new Map(), pids: [] };
  return {
    got,
    events: {
      onStdout: (chunk) => {
        got.stdout.push(Buffer.from(chunk));
        onStdout?.(chunk);
      },
      onStderr: (stage, chunk) => got.stderr.set(stage, (got.stderr.get(stage) ?? '') + chunk.toString('utf8')),
      onSpawnError: (stage, message) => got.spawnErrors.set(stage, message),
      onExit: (stage, exitCode, signal) => got.exits.set(stage, { exitCode, signal }),
    },
  };
}

function spec(argvs: string[][], extra: Partial<PipelineSpec> = {}): PipelineSpec {
  return { argvs, cwd: dir, env: sandboxEnv(), stderrLimitBytes: 2048, ...extra };
}

/** True while a process (or the group it leads) exists. */
function exists(pid: number): boolean {
  for (const target of [-pid, pid]) {
    try {
      process.kill(target, 0);
      return true;
    } catch {
      // gone
    }
  }
  return false;
}

async function eventually(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Runs sh -c SCRIPT in the helper, writing each started group's pids (`$$` and children) to a file. */
function pidFile(name: string): string {
  return path.join(dir, name);
}

describe('framed protocol', () => {
  it('reassembles messages split across arbitrary chunk boundaries', () => {
    const frames = Buffer.concat([
      Buffer.from([0, 0, 0, 11, 'p'.charCodeAt(0), 0, 0, 0, 7, 0, 1, 0, 0, 0x30, 0x39]),
      Buffer.from([0, 0, 0, 8, 'o'.charCodeAt(0), 0, 0, 0, 7, 0x61, 0x62, 0x63]),
      Buffer.from([0, 0, 0, 12, 'x'.charCodeAt(0), 0, 0, 0, 7, 0, 1, 0xff, 0xff, 0xff, 0xff, 9]),
      Buffer.from([0, 0, 0, 5, 'd'.charCodeAt(0), 0, 0, 0, 7]),
    ]);
    for (const step of [1, 2, 3, 7, frames.length]) {
      const decoder = new FrameDecoder();
      const got: HelperMessage[] = [];
      for (let at = 0; at < frames.length; at += step) decoder.push(frames.subarray(at, at + step), (m) => got.push(m));
      expect(got).toEqual([
        { kind: 'started', id: 7, stage: 1, pid: 12345 },
        { kind: 'stdout', id: 7, chunk: Buffer.from('abc') },
        { kind: 'exit', id: 7, stage: 1, exitCode: null, signal: 'SIGKILL' },
        { kind: 'done', id: 7 },
      ]);
    }
  });

  it('rejects a malformed stream (a frame length out of range, an unknown type)', () => {
    expect(() => new FrameDecoder().push(Buffer.from([0xff, 0, 0, 0, 0]), () => undefined)).toThrow(/frame of/);
    expect(() => new FrameDecoder().push(Buffer.from([0, 0, 0, 5, 'Z'.charCodeAt(0), 0, 0, 0, 1]), () => undefined)).toThrow(
      /unknown frame type/,
    );
  });
});

describe('spawner helper: pipeline semantics', () => {
  const client = new SpawnerHelperClient(python);
  afterAll(() => client.stop());

  it('connects the stages kernel-side; a downstream exit gives upstream SIGPIPE; stdin is /dev/null', async () => {
    const { events, got } = collector();
    const run = client.launch(
      spec([
        [seq, '1', '1000000'],
        [head, '-n', '3'],
      ]),
      events,
    );
    await run.closed;
    expect(Buffer.concat(got.stdout).toString()).toBe('1\n2\n3\n');
    expect(got.exits.get(0)).toEqual({ exitCode: null, signal: 'SIGPIPE' });
    expect(got.exits.get(1)).toEqual({ exitCode: 0, signal: null });

    const stdin = collector();
    await client.launch(spec([[cat]]), stdin.events).closed;
    expect(stdin.got.stdout).toEqual([]);
    expect(stdin.got.exits.get(0)).toEqual({ exitCode: 0, signal: null });
  });

  it('passes exit codes, the environment given (only it), the cwd, and arguments byte for byte', async () => {
    const { events, got } = collector();
    const weird = 'é ✓ $HOME `x` "q" \\ \n-- \ud800';
    await client.launch(
      spec([[sh, '-c', 'printf "%s|%s|%s|%s" "$1" "$PWD" "$LC_ALL" "${HOME-unset}"; exit 7', 'sh', weird]], {
        env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' },
      }),
      events,
    ).closed;
    // A lone surrogate is sent as U+FFFD, as Node's own spawn encodes it.
    expect(Buffer.concat(got.stdout).toString('utf8')).toBe(`${weird.replace('\ud800', '\ufffd')}|${dir}|C|unset`);
    expect(got.exits.get(0)).toEqual({ exitCode: 7, signal: null });
  });

  it('delivers a large binary stdout intact (many frames, the helper buffering behind a slow reader)', async () => {
    const file = path.join(dir, 'blob');
    const bytes = Buffer.alloc(6 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 2654435761) >>> 24;
    writeFileSync(file, bytes);
    const { events, got } = collector();
    await client.launch(spec([[cat, file], [cat]]), events).closed;
    const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');
    expect(digest(Buffer.concat(got.stdout))).toBe(digest(bytes));
    expect(got.exits.get(0)?.exitCode).toBe(0);
    expect(got.exits.get(1)?.exitCode).toBe(0);
  });

  it('caps stderr per stage', async () => {
    const { events, got } = collector();
    const noisy = [sh, '-c', 'i=0; while [ $i -lt 2000 ]; do echo "stage err line $i" >&2; i=$((i+1)); done'];
    await client.launch(spec([noisy, noisy], { stderrLimitBytes: 100 }), events).closed;
    expect(got.stderr.get(0)).toHaveLength(100);
    expect(got.stderr.get(1)).toHaveLength(100);
    expect(got.stderr.get(0)!.startsWith('stage err line 0\n')).toBe(true);
  });

  it('kills every stage whole (its process group, a background child included) and reports SIGKILL', async () => {
    const pids = pidFile('kill-pids');
    const { events, got } = collector();
    const script = `${sleep} 60 & echo $! > ${pids}.$1; ${sleep} 60`;
    const run = client.launch(
      spec([
        [sh, '-c', script, 'sh', 'a'],
        [sh, '-c', script, 'sh', 'b'],
      ]),
      events,
    );
    const { readFileSync, existsSync } = await import('node:fs');
    await eventually(() => existsSync(`${pids}.a`) && existsSync(`${pids}.b`), 'both stages started their background sleep');
    const background = ['a', 'b'].map((s) => Number(readFileSync(`${pids}.${s}`, 'utf8').trim()));
    run.kill();
    await run.closed;
    expect(got.exits.get(0)).toEqual({ exitCode: null, signal: 'SIGKILL' });
    expect(got.exits.get(1)).toEqual({ exitCode: null, signal: 'SIGKILL' });
    await eventually(() => background.every((pid) => !exists(pid)), 'the background sleeps were killed with their groups');
  });

  it('reports a program that cannot be started as a spawn error, and starts none after it', async () => {
    const missing = collector();
    await client.launch(spec([['/nonexistent/program', 'x'], [cat]]), missing.events).closed;
    expect(missing.got.spawnErrors.get(0)).toBe('spawn /nonexistent/program ENOENT');
    expect(missing.got.exits.size).toBe(0);
    expect(missing.got.spawnErrors.has(1)).toBe(false);

    // The second stage fails: the first, already running, is killed and reported.
    const second = collector();
    await client.launch(spec([[sleep, '60'], ['/nonexistent/program']]), second.events).closed;
    expect(second.got.spawnErrors.get(1)).toBe('spawn /nonexistent/program ENOENT');
    expect(second.got.exits.get(0)).toEqual({ exitCode: null, signal: 'SIGKILL' });

    const badCwd = collector();
    await client.launch(spec([[cat]], { cwd: path.join(dir, 'no-such-dir') }), badCwd.events).closed;
    expect(badCwd.got.spawnErrors.get(0)).toMatch(/ENOENT/);
  });

  it('is bounded: a request past its process limit is refused with a spawn error, and the next fits again', async () => {
    const bounded = new SpawnerHelperClient(python, 2);
    try {
      const running = collector();
      const first = bounded.launch(spec([[sleep, '60']]), running.events);
      const refused = collector();
      await bounded.launch(spec([[sleep, '60'], [cat]]), refused.events).closed;
      expect(refused.got.spawnErrors.get(0)).toBe('the spawner is at its limit of 2 processes');
      first.kill();
      await first.closed;
      const fits = collector();
      await bounded.launch(spec([[seq, '2'], [cat]]), fits.events).closed;
      expect(Buffer.concat(fits.got.stdout).toString()).toBe('1\n2\n');
    } finally {
      bounded.stop();
    }
  });

  it('runs 100 pipelines at once, each with its own answer', async () => {
    const runs = Array.from({ length: 100 }, (_, k) => {
      const { events, got } = collector();
      return client.launch(spec([[seq, String(k + 1)], [cat]]), events).closed.then(() => Buffer.concat(got.stdout).toString());
    });
    const outputs = await Promise.all(runs);
    outputs.forEach((out, k) => expect(out.split('\n').filter(Boolean)).toHaveLength(k + 1));
  });
});

describe('spawner helper: life cycle', () => {
  it('is restarted on the next call after it was SIGKILLed; the dead one’s groups are killed and reported', async () => {
    const client = new SpawnerHelperClient(python);
    try {
      const { events, got } = collector();
      const pids = pidFile('orphan-pid');
      // The pid is written a moment after the start, so the helper's 'started' frame (sent right after the
      // fork) has reached the client when the helper is killed (see README: the one unguarded window).
      const run = client.launch(spec([[sh, '-c', `${sleep} 0.3; echo $$ > ${pids}; exec ${sleep} 60`]]), events);
      const { readFileSync, existsSync } = await import('node:fs');
      await eventually(() => existsSync(pids) && readFileSync(pids, 'utf8').endsWith('\n'), 'the stage started');
      const orphan = Number(readFileSync(pids, 'utf8').trim());
      const firstHelper = client.helperPid!;
      process.kill(firstHelper, 'SIGKILL');
      await run.closed;
      expect(got.spawnErrors.get(0)).toMatch(/the spawner helper exited \(SIGKILL\)/);
      expect(exists(orphan)).toBe(false);

      const again = collector();
      await client.launch(spec([[seq, '3']]), again.events).closed;
      expect(Buffer.concat(again.got.stdout).toString()).toBe('1\n2\n3\n');
      expect(client.starts).toBe(2);
      expect(client.helperPid).not.toBe(firstHelper);
    } finally {
      client.stop();
    }
  });

  it('kills every group it started and exits when its stdin closes (the worker died)', async () => {
    // Speak the protocol to a helper directly, then close its stdin as the kernel does when the worker dies.
    const helper = spawn(python, ['-I', '-S', HELPER_SCRIPT], { stdio: ['pipe', 'pipe', 'inherit'] });
    const started: number[] = [];
    const decoder = new FrameDecoder();
    helper.stdout.on('data', (chunk: Buffer) =>
      decoder.push(chunk, (m) => {
        if (m.kind === 'started') started.push(m.pid);
      }),
    );
    const exited = new Promise<number | null>((resolve) => helper.on('exit', (code) => resolve(code)));
    helper.stdin.write(encodeStart(1, spec([[sleep, '60'], [cat]])));
    helper.stdin.write(encodeStart(2, spec([[sleep, '61']])));
    helper.stdin.write(encodeKill(99)); // an unknown id is ignored
    await eventually(() => started.length === 3, 'three processes started');
    expect(started.every(exists)).toBe(true);
    helper.stdin.end();
    expect(await exited).toBe(0);
    await eventually(() => started.every((pid) => !exists(pid)), 'every group the helper started is gone');
  });

  it('dies with a worker that is SIGKILLed, taking its groups with it', async () => {
    // A real worker: a Node process that starts a pipeline through its shared helper, prints the pids, and waits.
    const worker = path.join(dir, 'worker.ts');
    writeFileSync(
      worker,
      `import { sharedSpawnerHelper } from ${JSON.stringify(path.resolve('lib/sandbox/spawner/index.ts'))};
const helper = sharedSpawnerHelper();
helper.launch({ argvs: [[${JSON.stringify(sleep)}, '60']], cwd: '/', env: { PATH: '/usr/bin:/bin' }, stderrLimitBytes: 100 }, {
  onStdout() {}, onStderr() {}, onSpawnError() {}, onExit() {},
});
const timer = setInterval(() => {}, 1000);
void timer;
console.log(JSON.stringify({ helper: helper.helperPid }));
`,
    );
    const child = spawn(process.execPath, ['--import', 'tsx', worker], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    await eventually(() => out.includes('\n'), 'the worker reported its helper', 30_000);
    const helperPid = (JSON.parse(out) as { helper: number }).helper;
    const { execFileSync } = await import('node:child_process');
    const children = (): number[] => {
      try {
        return execFileSync('pgrep', ['-P', String(helperPid)])
          .toString()
          .trim()
          .split('\n')
          .map(Number);
      } catch {
        return []; // pgrep exits 1 while there is none yet
      }
    };
    await eventually(() => children().length === 1, 'the helper started the sleep', 30_000);
    const sleeps = children();
    child.kill('SIGKILL');
    await eventually(() => !exists(helperPid) && sleeps.every((pid) => !exists(pid)), 'the helper and its sleep died with the worker');
  });
});

describe('runPipeline through the helper', () => {
  beforeAll(() => selectSpawnPath('helper'));

  it('stops early when onStdout says enough, and kills the producer', async () => {
    const yes = findExecutable('yes')!;
    let seen = 0;
    const outcome = await runPipeline([{ executable: yes, args: ['y'] }], {
      cwd: dir,
      timeoutMs: 20_000,
      slots: new Semaphore(4),
      onStdout: (chunk) => ((seen += chunk.length) > 100_000 ? 'enough' : 'more'),
    });
    expect(outcome.stoppedEarly).toBe(true);
    expect(outcome.timedOut).toBe(false);
    expect(outcome.stages[0]!.signal).toBe('SIGKILL');
  });

  it('times out, aborts, and releases its permits only once every process has exited', async () => {
    const slots = new Semaphore(4);
    const timedOut = await runPipeline([{ executable: sleep, args: ['60'] }], { cwd: dir, timeoutMs: 300, slots, onStdout: () => 'more' });
    expect(timedOut.timedOut).toBe(true);
    expect(timedOut.stages[0]).toMatchObject({ exitCode: null, signal: 'SIGKILL' });
    expect(slots.inUse).toBe(0);

    const controller = new AbortController();
    const pending = runPipeline(
      [
        { executable: sleep, args: ['60'] },
        { executable: cat, args: [] },
      ],
      {
        cwd: dir,
        timeoutMs: 60_000,
        slots,
        signal: controller.signal,
        onStdout: () => 'more',
      },
    );
    await eventually(() => slots.inUse === 2, 'the pipeline holds its permits');
    controller.abort();
    const aborted = await pending;
    expect(aborted.aborted).toBe(true);
    await eventually(() => slots.inUse === 0, 'the permits came back after the processes exited');
  });

  it('is the default path where python3 is installed, one helper for the whole worker; CODEGREP_SPAWN_PATH overrides', () => {
    const saved = process.env.CODEGREP_SPAWN_PATH;
    try {
      selectSpawnPath(undefined);
      delete process.env.CODEGREP_SPAWN_PATH;
      expect(pipelineLauncher()).toBe(sharedSpawnerHelper());
      process.env.CODEGREP_SPAWN_PATH = 'in-process';
      expect(pipelineLauncher()).toBe(inProcessLauncher);
      process.env.CODEGREP_SPAWN_PATH = 'fork';
      expect(() => pipelineLauncher()).toThrow(/CODEGREP_SPAWN_PATH=fork/);
    } finally {
      if (saved === undefined) delete process.env.CODEGREP_SPAWN_PATH;
      else process.env.CODEGREP_SPAWN_PATH = saved;
      selectSpawnPath('helper');
    }
  });
});
