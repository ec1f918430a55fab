import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findExecutable } from '../../lib/sandbox/executables';
import { runTool } from '../../lib/sandbox/run-tool';
import { SANDBOX_LIMITS } from '../../lib/sandbox/limits';
import { limitedStage, runPipeline } from '../../lib/sandbox/subprocess';
import { makeSandboxFixture, type SandboxFixture } from '../fixtures/sandbox/fixture';
import { recordAttack } from './attack-log';

/**
 * Finding 3: unbounded resources in subprocesses. Every bomb of the issue ends quickly with a clear "limit
 * exceeded" result: refused up front where the input can be judged (repetition counts, thread counts,
 * find's date and regex options, sed on a sparse file), and stopped by the address-space limit that
 * prlimit puts on every sandboxed child where it cannot (the same bombs fed straight to runPipeline).
 */
let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture({ sparseGigabyte: true });
});
afterAll(() => fx.cleanup());

const BOMB = 'a{32767}{32767}';

describe('finding 3: bombs are refused before anything runs', () => {
  it.each([
    ['grep', { pattern: BOMB }, 'rg'],
    ['grep', { pattern: BOMB }, 'grep'],
    ['grep', { pattern: '(a{1000}){1000}' }, 'grep'],
    ['terminal', { command: `grep -E '${BOMB}' src/app.py` }, undefined],
    ['terminal', { command: `rg '${BOMB}' src` }, undefined],
    ['terminal', { command: `rg -e '(a{999}){999}' src` }, undefined],
    ['terminal', { command: `grep 'a\\{32767\\}' src/app.py` }, undefined],
    ['terminal', { command: `find . -regex '.*${BOMB}'` }, undefined],
    ['terminal', { command: "find . -iregex '(a{2000})'" }, undefined],
    ['terminal', { command: 'rg -j 1000 helper src' }, undefined],
    ['terminal', { command: 'rg --threads=99999999 helper src' }, undefined],
  ] as const)('%s %j [%s] says limit exceeded', async (tool, args, engine) => {
    const started = Date.now();
    const result = await runTool(fx.root, tool, args, engine ? { engine } : {});
    recordAttack(tool, `${JSON.stringify(args).slice(0, 60)} ${engine ?? ''}`, result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/limit exceeded/) });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it.each([
    `find . -newermt 'TZ="${'/tmp'}/fifo" 2020-01-01'`,
    'find . -newermt \'TZ="../../etc/passwd" 1 day ago\'',
    "find . -newermt '@0'",
    "find . -newermt 'next thursday'",
  ])('%s is refused without find opening anything', async (command) => {
    const started = Date.now();
    const result = await runTool(fx.root, 'terminal', { command });
    recordAttack('terminal', command, result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/find -newermt does not accept/) });
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('a plain -newermt date still works', async () => {
    const result = await runTool(fx.root, 'terminal', { command: 'find src -newermt 2000-01-01 -name app.py' });
    expect(result).toEqual({ status: 'ok', output: 'src/app.py' });
  });

  it("sed -n '$p' on a 1 GB sparse file is refused as binary at once", async () => {
    const started = Date.now();
    const result = await runTool(fx.root, 'terminal', { command: "sed -n '$p' sparse.bin" });
    recordAttack('terminal', "sed -n '$p' on a 1 GB sparse file", result.status === 'error' ? 'refused' : 'escaped');
    expect(result).toMatchObject({ status: 'error', message: expect.stringMatching(/binary file \(sparse file/) });
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe('finding 3: the address-space limit stops what gets past the checks', () => {
  it('every sandboxed child runs under prlimit (or ulimit) with address-space, CPU, core and file-size caps', () => {
    const stage = limitedStage({ executable: '/usr/bin/rg', args: ['x'] });
    if (findExecutable('prlimit')) {
      expect(stage.args.slice(0, 4)).toEqual([`--as=${SANDBOX_LIMITS.childAddressSpaceBytes}`, '--cpu=10:11', '--core=0', '--fsize=0']);
      expect(stage.args.slice(-3)).toEqual(['--', '/usr/bin/rg', 'x']);
    } else {
      expect(stage.args[1]).toContain(`ulimit -v ${SANDBOX_LIMITS.childAddressSpaceBytes / 1024} && ulimit -t 10`);
    }
  });

  it.each([
    ['GNU grep', 'grep', ['-E', '-e', BOMB, '--', 'src/app.py']],
    ['ripgrep', 'rg', ['--no-config', '-e', BOMB, '--', 'src/app.py']],
    ['rg with 1000 threads', 'rg', ['--no-config', '-j', '1000', '-e', 'zzz', '--', '.']],
  ] as const)('%s bomb fed straight to runPipeline ends with limitExceeded = memory', async (label, program, args) => {
    const executable = findExecutable(program)!;
    const started = Date.now();
    const run = await runPipeline([{ executable, args: [...args] }], { cwd: fx.root, timeoutMs: 20_000, onStdout: () => 'more' });
    const elapsed = Date.now() - started;
    recordAttack('subprocess', `${label} bomb past the validators`, run.stages[0]!.limitExceeded === 'memory' ? 'contained' : 'escaped');
    expect(run.timedOut).toBe(false);
    expect(run.stages[0]!.limitExceeded).toBe('memory');
    expect(elapsed).toBeLessThan(15_000);
  });

  it('a CPU-bound program (catastrophic backreferences) is stopped by its CPU limit with limitExceeded = cpu', async () => {
    const executable = findExecutable('grep')!;
    const started = Date.now();
    const run = await runPipeline(
      [{ executable, args: ['-E', '-e', '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$', '--', 'catastrophic.txt'] }],
      {
        cwd: fx.root,
        timeoutMs: 30_000,
        onStdout: () => 'more',
        resourceLimits: { cpuSeconds: 1 },
      },
    );
    recordAttack('subprocess', 'CPU-bound regex past the validators', run.stages[0]!.limitExceeded === 'cpu' ? 'contained' : 'escaped');
    expect(run.timedOut).toBe(false);
    expect(run.stages[0]!.limitExceeded).toBe('cpu');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it.each(['terminal', 'grep'] as const)('the %s tool turns a limit hit into a clear "limit exceeded" error', async (tool) => {
    const pattern = '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$';
    const args = tool === 'terminal' ? { command: `grep -E '${pattern}' catastrophic.txt` } : { pattern, path: 'catastrophic.txt' };
    const started = Date.now();
    const result = await runTool(fx.root, tool, args, { engine: 'grep', timeoutMs: 30_000, resourceLimits: { cpuSeconds: 1 } });
    recordAttack(tool, 'CPU-bound regex through the tool', result.status === 'error' ? 'contained' : 'escaped');
    expect(result).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/limit exceeded: the program used its 1 s of CPU time/),
    });
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
