import { promises as fs } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { planCommand, terminal } from './terminal';
import { APP_PY, makeSandboxFixture, type SandboxFixture } from '../../test/fixtures/sandbox/fixture';

let fx: SandboxFixture;
beforeAll(async () => {
  fx = await makeSandboxFixture();
  await fs.writeFile(path.join(fx.root, 'big.txt'), Array.from({ length: 3000 }, (_, k) => `row ${k}`).join('\n') + '\n');
});
afterAll(() => fx.cleanup());

const run = async (command: string) => terminal(fx.root, { command });

describe('terminal: the allowed programs work like a shell', () => {
  it('rg with a path prints repo-relative paths and line numbers', async () => {
    const answer = await run("rg -n 'def helper' src");
    expect(answer.status).toBe('ok');
    // Several search threads print files in the order they finish (rg's own behaviour without --sort): compare
    // the lines, not their order across files.
    expect(answer.output.split('\n').sort()).toEqual([
      'src/app.py:7:def helper(path):',
      'src/util/helpers.py:1:def helper_two():',
      'src/util/helpers.py:4:def helper_three():',
    ]);
  });

  it('pipes stages into each other', async () => {
    expect(await run('rg -n --sort path helper src | head -n 2')).toEqual({
      status: 'ok',
      output: 'src/app.py:5:        return helper(os.getcwd())\nsrc/app.py:7:def helper(path):',
    });
    expect((await run('cat lines.txt | grep -c line')).output).toBe('500');
    expect((await run("find src -name '*.py' | wc -l")).output).toBe('3');
  });

  it("sed -n 'N,Mp' prints a line range", async () => {
    expect((await run("sed -n '3,4p' src/app.py")).output).toBe('class App:\n    def run(self):');
    expect((await run('sed -n 500p lines.txt')).output).toBe('line 500');
    expect((await run("sed -n '499,$p' lines.txt")).output).toBe('line 499\nline 500');
  });

  it('cat, head, tail, wc and ls', async () => {
    expect((await run('cat -n src/util/helpers.py')).output).toBe(
      '     1\tdef helper_two():\n     2\t    return 2\n     3\t\n     4\tdef helper_three():\n     5\t    return 3',
    );
    expect((await run('head -2 lines.txt')).output).toBe('line 1\nline 2');
    expect((await run('tail -n 1 lines.txt')).output).toBe('line 500');
    expect((await run('tail -n +499 lines.txt')).output).toBe('line 499\nline 500');
    expect((await run('wc -l lines.txt src/app.py')).output).toBe(' 500 lines.txt\n   8 src/app.py\n 508 total');
    expect((await run('ls src')).output).toBe('app.py\nutil\nutil.txt');
    expect((await run('ls -1a src/util')).output).toBe('.\n..\n__init__.py\nhelpers.py');
  });

  it('find lists inside the root without following symlinks', async () => {
    expect((await run("find . -path ./links -prune -o -name '*.py' -type f -print")).output.split('\n').sort()).toEqual([
      './src/app.py',
      './src/util/__init__.py',
      './src/util/helpers.py',
      './tests/test_app.py',
    ]);
    expect((await run('find links -type l')).output.split('\n').sort()).toEqual([
      'links/abs-out',
      'links/environ',
      'links/inside',
      'links/loop-a',
      'links/loop-b',
      'links/out-dir',
      'links/out-file',
    ]);
  });

  it('expands unquoted globs inside the root like bash, and keeps quoted ones literal', async () => {
    expect((await run('wc -l src/*.py tests/*')).output).toBe('  8 src/app.py\n  4 tests/test_app.py\n 12 total');
    expect((await run("ls 'src/*.py'")).message).toMatch(/no such file or directory: "src\/\*\.py"/);
    expect((await run('ls *.nothing')).status).toBe('error'); // no match: stays literal, then the guard says it does not exist
    expect((await run('rg -c needle_not_here *.md')).output).toBe('(no output)\n[exit code 1]');
  });

  it('absolute paths inside the root are rewritten to repo-relative operands', async () => {
    expect((await run(`rg -n shout ${fx.root}/docs`)).output).toBe('docs/guide.md:1:Use helper() to shout.');
  });

  it('operands that look like flags stay operands', async () => {
    expect((await run('cat -- -e')).output).toBe('a file whose name looks like a flag');
    expect((await run('rg -e --files')).output).toBe('(no output)\n[exit code 1]');
    expect((await run('grep -c -- --files src/app.py')).output).toBe('0\n[exit code 1]');
  });

  it('shows stderr and the exit code of a failing command', async () => {
    const r = await run("rg 'foo(' src");
    expect(r.status).toBe('ok');
    expect(r.output).toMatch(/regex parse error[\s\S]*unclosed group[\s\S]*\[exit code 2\]$/);
  });

  it('cuts output at 4096 characters with a marker', async () => {
    const r = await run('cat big.txt');
    expect(r.status).toBe('truncated');
    expect(r.output.length).toBeLessThanOrEqual(4096);
    expect(r.output.split('\n').at(-1)).toMatch(/^\[output cut: first \d+ of 25889 characters shown\]$/);
    expect(r.output.startsWith('row 0\nrow 1\n')).toBe(true);
  });

  it('kills the whole pipeline on timeout and returns promptly', async () => {
    const started = Date.now();
    const r = await terminal(
      fx.root,
      { command: "cat catastrophic.txt | grep -E '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$' | wc -l" },
      { timeoutMs: 500 },
    );
    expect(Date.now() - started).toBeLessThan(3000);
    expect(r).toMatchObject({
      status: 'error',
      // Nothing was printed, so nothing is called partial.
      message: 'terminal: the command timed out after 500 ms and was killed before it printed anything',
      output: '(no output)',
    });
  });

  it('refusals list what is allowed', async () => {
    const r = await run('python -c 1');
    expect(r.status).toBe('error');
    expect(r.message).toMatch(/program "python" is not allowed\nAllowed: rg, grep, sed -n 'N,Mp' FILE, cat, head, tail, find/);
    expect((await run('cd src && ls')).message).toMatch(/no cd needed/);
    expect((await run('cd src')).message).toMatch(/"cd" is not allowed \(commands already run in the repository root\)/);
    expect((await run('rg --frobnicate x')).message).toMatch(/rg option "--frobnicate" is not allowed; allowed options: -i\/--ignore-case/);
    expect((await run('rg -A x foo')).message).toMatch(/needs a non-negative number/);
    expect((await run('rg -n | head')).message).toMatch(/rg needs a pattern/);
    expect((await run('cat a | cat b | cat c | cat d | cat e | cat f')).message).toMatch(/at most 5 commands per pipeline/);
  });
});

describe('planCommand rebuilds every argument list', () => {
  it('puts operands after -- and patterns in --regexp=, adding rg --no-config and the thread cap', async () => {
    const plan = await planCommand(fx.root, 'rg -in -A2 helper src -g "*.py"');
    expect(plan.ok).toBe(true);
    if (!plan.ok) return;
    expect(plan.stages[0]!.args).toEqual([
      '--no-config',
      '--no-ignore-parent',
      '--no-ignore-global',
      '--threads=4',
      '--ignore-case',
      '--line-number',
      '--after-context=2',
      '--glob=*.py',
      '--iglob=!.git',
      '--regexp=helper',
      '--',
      'src',
    ]);
    expect(path.isAbsolute(plan.stages[0]!.executable)).toBe(true);
  });

  it('rewrites sed, head and find into fixed shapes', async () => {
    const plan = await planCommand(fx.root, "sed -n ' 1 , 5 p' src/app.py | head -3 | grep -v x");
    expect(plan.ok && plan.stages.map((s) => s.args)).toEqual([
      ['-n', '-e', '1,5p', '--', 'src/app.py'],
      ['--lines=3', '--'],
      ['--invert-match', '--exclude-dir=.[Gg][Ii][Tt]', '--exclude=.[Gg][Ii][Tt]', '--regexp=x', '--'],
    ]);
    const find = await planCommand(fx.root, 'find -- -e -name x');
    expect(find.ok).toBe(false);
    const findDash = await planCommand(fx.root, 'find -e -maxdepth 1');
    expect(findDash.ok).toBe(false); // '-e' is read as an expression, as find would
    const findPath = await planCommand(fx.root, 'find ./-e -maxdepth 0');
    expect(findPath.ok && findPath.stages[0]!.args).toEqual([
      './-e',
      '-maxdepth',
      '0',
      ...['(', '-iname', '.git', '-o', '-ipath', '*/.git/*', ')', '-prune', '-o', '(', '-true', ')', '-print'],
    ]);
    // .git is pruned in front of the model's expression, whose -print (or -printf, -quit) is kept as written.
    const findGit = await planCommand(fx.root, "find . -depth -name '*.py' -print -o -maxdepth 2");
    expect(findGit.ok && findGit.stages[0]!.args).toEqual([
      ...['.', '-depth', '-maxdepth', '2'],
      ...['(', '-iname', '.git', '-o', '-ipath', '*/.git/*', ')', '-prune', '-o'],
      ...['(', '-true', '-name', '*.py', '-print', '-o', '-true', ')'],
    ]);
  });

  it('keeps the sample output of a real file exact', async () => {
    expect((await run('cat src/app.py')).output).toBe(APP_PY.replace(/\n$/, ''));
  });
});
