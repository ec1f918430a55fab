import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';
import { runTool } from './run-tool';
import { findExecutable } from './executables';
import { runPipeline, toolPlacement } from './subprocess';

// A machine where bubblewrap may not create namespaces (a container without user namespaces).
vi.mock('./namespace', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./namespace')>()),
  probeNamespace: () =>
    Promise.resolve({ ok: false, reason: 'bwrap cannot create the sandbox here: No permissions to create new namespace' }),
}));

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture();
});
afterAll(() => fx.cleanup());

describe('isolation asked for on a machine that cannot provide it', () => {
  it.each([
    ['grep', { pattern: 'helper' }],
    ['glob', { pattern: '**/*.py' }],
    ['read', { path: 'src/app.py' }],
    ['terminal', { command: 'cat src/app.py' }],
  ] as const)('%s returns an error observation naming the config switch, and runs nothing', async (tool, args) => {
    const result = await runTool(fx.root, tool, args);
    expect(result.status).toBe('error');
    expect(result.output).toBe('');
    expect(result.message).toMatch(/tool sandbox is unavailable on this machine \(bwrap cannot create the sandbox here/);
    expect(result.message).toMatch(/sandbox\.isolation: "filter-only"/);
  });

  it('runPipeline itself refuses to start a namespace stage unisolated', async () => {
    let output = '';
    const run = await runPipeline([{ executable: findExecutable('cat')!, args: ['src/app.py'] }], {
      cwd: fx.root,
      timeoutMs: 5000,
      placement: toolPlacement(fx.root),
      onStdout: (chunk) => ((output += chunk.toString()), 'more'),
    });
    expect(run.stages[0]!.spawnError).toMatch(/tool sandbox is unavailable/);
    expect(output).toBe('');
  });

  it('filter-only, set explicitly, runs the tools with the allowlist and path guard alone', async () => {
    const result = await runTool(fx.root, 'read', { path: 'src/app.py', end_line: 1 }, { isolation: 'filter-only' });
    expect(result).toEqual({ status: 'ok', output: '1\timport os' });
    const refused = await runTool(fx.root, 'terminal', { command: 'cat links/out-file' }, { isolation: 'filter-only' });
    expect(refused).toMatchObject({ status: 'error', message: expect.stringMatching(/through a symlink/) });
  });
});
