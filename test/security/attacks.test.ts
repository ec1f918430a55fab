import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ToolResult } from '../../schemas/tools';
import type { SearchEngine } from '../../lib/sandbox/engine';
import { runTool } from '../../lib/sandbox/run-tool';
import { makeSandboxFixture, type SandboxFixture } from '../fixtures/sandbox/fixture';
import { recordAttack } from './attack-log';

/**
 * The attack corpus: every input is refused or bounded with a clear message, and the secret planted
 * outside the root (file contents, and this process's environment for /proc/self/environ) never appears in
 * any output or message.
 */
let fx: SandboxFixture;
const seen: string[] = [];

beforeAll(async () => {
  fx = await makeSandboxFixture({ sparseGigabyte: true });
  process.env.CODEGREP_SANDBOX_TEST_SECRET = fx.secretToken;
});
afterAll(async () => {
  delete process.env.CODEGREP_SANDBOX_TEST_SECRET;
  await fx.cleanup();
});

type Expectation = { refused: RegExp } | { bounded: RegExp; status?: ToolResult['status'] } | { harmless: true };

interface Attack {
  name: string;
  tool: string;
  args: (fx: SandboxFixture) => unknown;
  expect: Expectation;
  engines?: SearchEngine[];
  timeoutMs?: number;
  maxMs?: number;
}

const SYMLINK_REFUSAL = /through a symlink/;

const ATTACKS: Attack[] = [
  // read
  { name: 'read ..', tool: 'read', args: () => ({ path: '..' }), expect: { refused: /leaves the repository root/ } },
  {
    name: 'read ../../etc/passwd',
    tool: 'read',
    args: () => ({ path: '../../etc/passwd' }),
    expect: { refused: /leaves the repository root/ },
  },
  { name: 'read /etc/passwd', tool: 'read', args: () => ({ path: '/etc/passwd' }), expect: { refused: /outside the repository root/ } },
  { name: 'read ../secret.txt', tool: 'read', args: () => ({ path: '../secret.txt' }), expect: { refused: /leaves the repository root/ } },
  {
    name: 'read root/../secret.txt (absolute)',
    tool: 'read',
    args: (f) => ({ path: `${f.root}/../secret.txt` }),
    expect: { refused: /outside the repository root/ },
  },
  {
    name: 'read src/../../secret.txt',
    tool: 'read',
    args: () => ({ path: 'src/../../secret.txt' }),
    expect: { refused: /leaves the repository root/ },
  },
  {
    name: 'read relative symlink pointing out',
    tool: 'read',
    args: () => ({ path: 'links/out-file' }),
    expect: { refused: /through a symlink.*refused/ },
  },
  {
    name: 'read absolute symlink pointing out',
    tool: 'read',
    args: () => ({ path: 'links/abs-out' }),
    expect: { refused: /through a symlink.*refused/ },
  },
  {
    name: 'read through a directory symlink pointing out',
    tool: 'read',
    args: () => ({ path: 'links/out-dir/secret.py' }),
    expect: { refused: /through a symlink.*refused/ },
  },
  { name: 'read symlink loop', tool: 'read', args: () => ({ path: 'links/loop-a' }), expect: { refused: /symlink loop/ } },
  {
    name: 'read /proc/self/environ',
    tool: 'read',
    args: () => ({ path: '/proc/self/environ' }),
    expect: { refused: /outside the repository root/ },
  },
  {
    name: 'read symlink to /proc/self/environ',
    tool: 'read',
    args: () => ({ path: 'links/environ' }),
    expect: { refused: /through a symlink.*refused/ },
  },
  {
    name: 'read /proc/self/root/<parent>/secret.txt',
    tool: 'read',
    args: (f) => ({ path: `/proc/self/root${f.parent}/secret.txt` }),
    expect: { refused: /outside the repository root/ },
  },
  {
    name: 'read NUL byte in path',
    tool: 'read',
    args: () => ({ path: 'src/app.py\u0000../../secret.txt' }),
    expect: { refused: /NUL byte/ },
  },
  { name: 'read 1 GB sparse file', tool: 'read', args: () => ({ path: 'sparse.bin' }), expect: { refused: /sparse file/ }, maxMs: 1500 },
  {
    name: 'read 1 GB sparse file far line',
    tool: 'read',
    args: () => ({ path: 'sparse.bin', start_line: 5_000_000 }),
    expect: { refused: /sparse file/ },
    maxMs: 1500,
  },
  { name: 'read binary file', tool: 'read', args: () => ({ path: 'data/blob.bin' }), expect: { refused: /binary/ } },
  { name: 'read a FIFO', tool: 'read', args: () => ({ path: 'fifo' }), expect: { refused: /not a regular file/ }, maxMs: 1500 },
  { name: 'read a directory', tool: 'read', args: () => ({ path: 'src' }), expect: { refused: /is a directory/ } },
  // grep (both engines)
  {
    name: 'grep pattern --files',
    tool: 'grep',
    args: () => ({ pattern: '--files' }),
    expect: { bounded: /No matches for "--files"/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep pattern -f/etc/passwd',
    tool: 'grep',
    args: () => ({ pattern: '-f/etc/passwd' }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep pattern --pre=sh',
    tool: 'grep',
    args: () => ({ pattern: '--pre=sh' }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep for the secret token finds nothing (symlinks not followed)',
    tool: 'grep',
    args: (f) => ({ pattern: f.secretToken.slice(0, 14) }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep path ..',
    tool: 'grep',
    args: () => ({ pattern: 'x', path: '..' }),
    expect: { refused: /leaves the repository root/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep path /etc',
    tool: 'grep',
    args: () => ({ pattern: 'root', path: '/etc' }),
    expect: { refused: /outside the repository root/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep path symlinked dir pointing out',
    tool: 'grep',
    args: () => ({ pattern: 'TOKEN', path: 'links/out-dir' }),
    expect: { refused: /through a symlink/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep glob ../*',
    tool: 'grep',
    args: () => ({ pattern: 'TOKEN', glob: '../*' }),
    expect: { refused: /'\.\.'/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep glob that only an outward symlink could match',
    tool: 'grep',
    args: () => ({ pattern: 'TOKEN', glob: 'links/out-dir/*.py' }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep 1 GB sparse file',
    tool: 'grep',
    args: () => ({ pattern: 'zzz', path: 'sparse.bin' }),
    expect: { bounded: /binary file/, status: 'ok' },
    engines: ['rg', 'grep'],
    maxMs: 1500,
  },
  {
    name: 'grep whole tree with a 1 GB sparse file in it',
    tool: 'grep',
    args: () => ({ pattern: 'zzz-never' }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
    maxMs: 3000,
  },
  {
    name: 'grep a FIFO',
    tool: 'grep',
    args: () => ({ pattern: 'x', path: 'fifo' }),
    expect: { refused: /not a regular file or directory/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep catastrophic backreference regex (GNU grep) ends by timeout',
    tool: 'grep',
    args: () => ({ pattern: '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$', path: 'catastrophic.txt' }),
    expect: { refused: /timed out after 1 s/ },
    engines: ['grep'],
    timeoutMs: 1000,
    maxMs: 4000,
  },
  {
    name: 'grep path symlink loop',
    tool: 'grep',
    args: () => ({ pattern: 'x', path: 'links/loop-a' }),
    expect: { refused: /symlink loop/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'grep path /proc/self/environ',
    tool: 'grep',
    args: (f) => ({ pattern: f.secretToken, path: '/proc/self/environ' }),
    expect: { refused: /outside the repository root/ },
    engines: ['rg', 'grep'],
  },
  { name: 'grep pattern with a NUL byte', tool: 'grep', args: () => ({ pattern: 'a\u0000b' }), expect: { refused: /NUL byte/ } },
  {
    name: 'grep path with a NUL byte',
    tool: 'grep',
    args: () => ({ pattern: 'a', path: 'src\u0000/../..' }),
    expect: { refused: /NUL byte/ },
  },
  {
    name: 'grep glob that looks like a flag',
    tool: 'grep',
    args: () => ({ pattern: 'helper', glob: '--pre=sh' }),
    expect: { bounded: /No matches/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  { name: 'grep pattern with a newline', tool: 'grep', args: () => ({ pattern: 'a\nb' }), expect: { refused: /single line/ } },
  // glob
  { name: 'glob ../*', tool: 'glob', args: () => ({ pattern: '../*' }), expect: { refused: /'\.\.'/ }, engines: ['rg', 'grep'] },
  {
    name: 'glob /etc/*',
    tool: 'glob',
    args: () => ({ pattern: '/etc/*' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'glob **/secret.* (outside only via symlinks)',
    tool: 'glob',
    args: () => ({ pattern: '**/secret.*' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'glob links/out-dir/**',
    tool: 'glob',
    args: () => ({ pattern: 'links/out-dir/**' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'glob pattern --files',
    tool: 'glob',
    args: () => ({ pattern: '--files' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'glob /proc/self/*',
    tool: 'glob',
    args: () => ({ pattern: '/proc/self/*' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  { name: 'glob with a NUL byte', tool: 'glob', args: () => ({ pattern: '*\u0000/etc/passwd' }), expect: { refused: /NUL byte/ } },
  {
    name: 'glob links/loop-*/x',
    tool: 'glob',
    args: () => ({ pattern: 'links/loop-a/**' }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  // terminal
  {
    name: 'terminal cat ../secret.txt',
    tool: 'terminal',
    args: () => ({ command: 'cat ../secret.txt' }),
    expect: { refused: /leaves the repository root/ },
  },
  {
    name: 'terminal cat symlink out',
    tool: 'terminal',
    args: () => ({ command: 'cat links/out-file' }),
    expect: { refused: /through a symlink/ },
  },
  {
    name: 'terminal cat /proc/self/environ',
    tool: 'terminal',
    args: () => ({ command: 'cat /proc/self/environ' }),
    expect: { refused: /outside the repository root/ },
  },
  {
    name: 'terminal head symlink loop',
    tool: 'terminal',
    args: () => ({ command: 'head links/loop-b' }),
    expect: { refused: /symlink loop/ },
  },
  {
    name: 'terminal rg for the token',
    tool: 'terminal',
    args: (f) => ({ command: `rg -uu ${f.secretToken}` }),
    expect: { refused: /-u is not allowed/ },
  },
  {
    name: 'terminal rg --hidden --no-ignore for the token',
    tool: 'terminal',
    args: (f) => ({ command: `rg --hidden --no-ignore ${f.secretToken}` }),
    expect: { bounded: /exit code 1/, status: 'ok' },
  },
  {
    name: 'terminal grep -r for the token',
    tool: 'terminal',
    args: (f) => ({ command: `grep -r ${f.secretToken} .` }),
    expect: { bounded: /exit code 1/, status: 'ok' },
  },
  {
    name: 'terminal grep -R (follows symlinks)',
    tool: 'terminal',
    args: () => ({ command: 'grep -R TOKEN .' }),
    expect: { refused: /-R is not allowed/ },
  },
  {
    name: 'terminal rg -L (follows symlinks)',
    tool: 'terminal',
    args: () => ({ command: 'rg -L TOKEN' }),
    expect: { refused: /-L is not allowed/ },
  },
  {
    name: 'terminal rg --pre=sh',
    tool: 'terminal',
    args: () => ({ command: 'rg --pre=sh x' }),
    expect: { refused: /--pre is not allowed/ },
  },
  {
    name: 'terminal rg --pre sh',
    tool: 'terminal',
    args: () => ({ command: 'rg --pre sh x src' }),
    expect: { refused: /--pre is not allowed/ },
  },
  {
    name: 'terminal rg --pre-glob',
    tool: 'terminal',
    args: () => ({ command: "rg --pre-glob '*' x" }),
    expect: { refused: /--pre-glob is not allowed/ },
  },
  { name: 'terminal rg -z', tool: 'terminal', args: () => ({ command: 'rg -z x' }), expect: { refused: /-z is not allowed/ } },
  {
    name: 'terminal rg --search-zip',
    tool: 'terminal',
    args: () => ({ command: 'rg --search-zip x' }),
    expect: { refused: /--search-zip is not allowed/ },
  },
  {
    name: 'terminal rg --hostname-bin',
    tool: 'terminal',
    args: () => ({ command: 'rg --hostname-bin=id x' }),
    expect: { refused: /--hostname-bin is not allowed/ },
  },
  {
    name: 'terminal rg --ignore-file outside',
    tool: 'terminal',
    args: () => ({ command: 'rg --ignore-file ../secret.txt x' }),
    expect: { refused: /--ignore-file is not allowed/ },
  },
  {
    name: 'terminal rg -f pattern file outside',
    tool: 'terminal',
    args: () => ({ command: 'rg -f ../secret.txt src' }),
    expect: { refused: /-f is not allowed/ },
  },
  {
    name: 'terminal grep -f pattern file outside',
    tool: 'terminal',
    args: () => ({ command: 'grep -f ../secret.txt src' }),
    expect: { refused: /-f is not allowed/ },
  },
  {
    name: 'terminal grep --exclude-from',
    tool: 'terminal',
    args: () => ({ command: 'grep -r --exclude-from=../secret.txt x .' }),
    expect: { refused: /--exclude-from is not allowed/ },
  },
  {
    name: 'terminal find -exec',
    tool: 'terminal',
    args: () => ({ command: 'find . -name "*.py" -exec cat {} \\;' }),
    expect: { refused: /-exec is not allowed/ },
  },
  {
    name: 'terminal find -execdir',
    tool: 'terminal',
    args: () => ({ command: 'find . -execdir id +' }),
    expect: { refused: /-execdir is not allowed/ },
  },
  {
    name: 'terminal find -delete',
    tool: 'terminal',
    args: () => ({ command: 'find . -name "*.py" -delete' }),
    expect: { refused: /-delete is not allowed/ },
  },
  {
    name: 'terminal find -fprint',
    tool: 'terminal',
    args: () => ({ command: 'find . -fprint out.txt' }),
    expect: { refused: /-fprint is not allowed/ },
  },
  { name: 'terminal find -ok', tool: 'terminal', args: () => ({ command: 'find . -ok id ;' }), expect: { refused: /';' is not allowed/ } },
  {
    name: 'terminal find -L',
    tool: 'terminal',
    args: () => ({ command: 'find -L . -name "*.py"' }),
    expect: { refused: /-L is not allowed/ },
  },
  {
    name: 'terminal find ..',
    tool: 'terminal',
    args: () => ({ command: 'find .. -name secret.txt' }),
    expect: { refused: /leaves the repository root/ },
  },
  {
    name: 'terminal find /',
    tool: 'terminal',
    args: () => ({ command: 'find / -name secret.txt' }),
    expect: { refused: /outside the repository root/ },
  },
  {
    name: 'terminal sed -i',
    tool: 'terminal',
    args: () => ({ command: "sed -i '1d' src/app.py" }),
    expect: { refused: /-i is not allowed/ },
  },
  {
    name: 'terminal sed e command',
    tool: 'terminal',
    args: () => ({ command: "sed -n '1e id' src/app.py" }),
    expect: { refused: /sed is limited to printing lines/ },
  },
  {
    name: 'terminal sed w command',
    tool: 'terminal',
    args: () => ({ command: "sed -n '1w out.txt' src/app.py" }),
    expect: { refused: /sed is limited to printing lines/ },
  },
  {
    name: 'terminal sed without -n',
    tool: 'terminal',
    args: () => ({ command: "sed '1p' src/app.py" }),
    expect: { refused: /sed is limited to printing lines/ },
  },
  {
    name: 'terminal sed on a file outside',
    tool: 'terminal',
    args: () => ({ command: "sed -n '1p' ../secret.txt" }),
    expect: { refused: /leaves the repository root/ },
  },
  {
    name: 'terminal ;',
    tool: 'terminal',
    args: () => ({ command: 'cat src/app.py; cat ../secret.txt' }),
    expect: { refused: /';' is not allowed/ },
  },
  {
    name: 'terminal &&',
    tool: 'terminal',
    args: () => ({ command: 'cd .. && cat secret.txt' }),
    expect: { refused: /'&&' is not allowed/ },
  },
  {
    name: 'terminal ||',
    tool: 'terminal',
    args: () => ({ command: 'cat nope || cat ../secret.txt' }),
    expect: { refused: /'\|\|' is not allowed/ },
  },
  { name: 'terminal &', tool: 'terminal', args: () => ({ command: 'cat src/app.py & id' }), expect: { refused: /background jobs/ } },
  {
    name: 'terminal > redirection',
    tool: 'terminal',
    args: () => ({ command: 'cat src/app.py > out.txt' }),
    expect: { refused: /redirection '>'/ },
  },
  {
    name: 'terminal < redirection',
    tool: 'terminal',
    args: () => ({ command: 'cat < ../secret.txt' }),
    expect: { refused: /redirection '<'/ },
  },
  {
    name: 'terminal $(...)',
    tool: 'terminal',
    args: () => ({ command: 'cat $(echo ../secret.txt)' }),
    expect: { refused: /\$\(\.\.\.\) substitution/ },
  },
  {
    name: 'terminal $(...) inside double quotes',
    tool: 'terminal',
    args: () => ({ command: 'rg "$(id)"' }),
    expect: { refused: /\$\(\.\.\.\) substitution/ },
  },
  { name: 'terminal backticks', tool: 'terminal', args: () => ({ command: 'cat `echo ../secret.txt`' }), expect: { refused: /backticks/ } },
  { name: 'terminal $VAR', tool: 'terminal', args: () => ({ command: 'cat $HOME/.bashrc' }), expect: { refused: /variables/ } },
  { name: 'terminal ~', tool: 'terminal', args: () => ({ command: 'cat ~/.bashrc' }), expect: { refused: /'~' expansion/ } },
  { name: 'terminal newline', tool: 'terminal', args: () => ({ command: 'cat src/app.py\nid' }), expect: { refused: /newlines/ } },
  {
    name: 'terminal other program',
    tool: 'terminal',
    args: () => ({ command: 'bash -c id' }),
    expect: { refused: /program "bash" is not allowed/ },
  },
  {
    name: 'terminal absolute program path',
    tool: 'terminal',
    args: () => ({ command: '/bin/cat ../secret.txt' }),
    expect: { refused: /program "\/bin\/cat" is not allowed/ },
  },
  {
    name: 'terminal python in a pipeline',
    tool: 'terminal',
    args: () => ({ command: 'cat src/app.py | python3 -c "import os"' }),
    expect: { refused: /program "python3" is not allowed/ },
  },
  { name: 'terminal tail -f', tool: 'terminal', args: () => ({ command: 'tail -f src/app.py' }), expect: { refused: /-f is not allowed/ } },
  {
    name: 'terminal wc --files0-from',
    tool: 'terminal',
    args: () => ({ command: 'wc --files0-from=../secret.txt' }),
    expect: { refused: /--files0-from is not allowed/ },
  },
  { name: 'terminal ls -L', tool: 'terminal', args: () => ({ command: 'ls -L links' }), expect: { refused: /-L is not allowed/ } },
  { name: 'terminal ls ../*', tool: 'terminal', args: () => ({ command: 'ls ../*' }), expect: { refused: /leaves the repository root/ } },
  {
    name: 'terminal cat links/* (expansion skips outward links)',
    tool: 'terminal',
    args: () => ({ command: 'cat links/*' }),
    expect: { bounded: /def helper/, status: 'ok' },
  },
  {
    name: 'terminal cat a FIFO',
    tool: 'terminal',
    args: () => ({ command: 'cat fifo' }),
    expect: { refused: /not a regular file or directory/ },
  },
  {
    name: 'terminal cat 1 GB sparse file',
    tool: 'terminal',
    args: () => ({ command: 'cat sparse.bin' }),
    expect: { bounded: /binary data: output stopped/, status: 'truncated' },
    maxMs: 3000,
  },
  {
    name: 'terminal 1 GB sparse file | head -c',
    tool: 'terminal',
    args: () => ({ command: 'cat sparse.bin | head -c 10 | wc -c' }),
    expect: { bounded: /^10\n/, status: 'ok' },
    maxMs: 3000,
  },
  {
    name: 'terminal catastrophic regex ends by timeout',
    tool: 'terminal',
    args: () => ({ command: "grep -E '^(.*)(.*)(.*)(.*)(.*)\\5\\4\\3\\2\\1b$' catastrophic.txt" }),
    expect: { refused: /timed out after 1 s and was killed/ },
    timeoutMs: 1000,
    maxMs: 4000,
  },
  {
    name: 'terminal NUL byte',
    tool: 'terminal',
    args: () => ({ command: 'cat src/app.py\u0000../secret.txt' }),
    expect: { refused: /NUL byte/ },
  },
  {
    name: 'terminal find with a symlink loop start',
    tool: 'terminal',
    args: () => ({ command: 'find links/loop-a' }),
    expect: { refused: /symlink loop/ },
  },
  {
    name: 'terminal unterminated quote',
    tool: 'terminal',
    args: () => ({ command: "rg 'oops" }),
    expect: { refused: /unterminated single quote/ },
  },
  // dispatcher
  { name: 'unknown tool', tool: 'bash', args: () => ({ command: 'id' }), expect: { refused: /unknown tool "bash"/ } },
  { name: 'arguments that are not JSON', tool: 'read', args: () => '{"path": "../secret.txt"', expect: { refused: /not valid JSON/ } },
  {
    name: 'extra argument',
    tool: 'read',
    args: () => ({ path: 'src/app.py', follow_symlinks: true }),
    expect: { refused: /invalid arguments for read/ },
  },
  // probes of names and existence, resource options, git's files
  // git's control data answers as a missing file does (test/security/namespace.test.ts compares the two).
  {
    name: 'read .git file of the worktree',
    tool: 'read',
    args: () => ({ path: '.git' }),
    expect: { refused: /^read: no such file or directory: "\.git"$/ },
  },
  {
    name: 'terminal cat .git',
    tool: 'terminal',
    args: () => ({ command: 'cat .git' }),
    expect: { refused: /cat: no such file or directory: "\.git"/ },
  },
  {
    name: 'terminal rg --hidden for the gitdir line',
    tool: 'terminal',
    args: () => ({ command: "rg --hidden -g '*' nonexistent/worktrees" }),
    expect: { bounded: /exit code 1/, status: 'ok' },
  },
  {
    name: 'terminal grep -r for the gitdir line',
    tool: 'terminal',
    args: () => ({ command: 'grep -r nonexistent/worktrees .' }),
    expect: { bounded: /exit code 1/, status: 'ok' },
  },
  {
    name: 'terminal find -lname probe',
    tool: 'terminal',
    args: () => ({ command: "find links -lname '*secret*'" }),
    expect: { refused: /-lname is not allowed/ },
  },
  {
    name: 'terminal find -printf %l',
    tool: 'terminal',
    args: () => ({ command: "find links -printf '%l'" }),
    expect: { refused: /-printf does not accept/ },
  },
  {
    name: 'terminal find -newermt TZ file',
    tool: 'terminal',
    args: () => ({ command: 'find . -newermt \'TZ="/etc/passwd" 2020-01-01\'' }),
    expect: { refused: /-newermt does not accept/ },
  },
  {
    name: 'terminal find -newermt TZ fifo',
    tool: 'terminal',
    args: () => ({ command: 'find . -newermt \'TZ="fifo" 2020-01-01\'' }),
    expect: { refused: /-newermt does not accept/ },
  },
  {
    name: 'terminal rg -j 1000',
    tool: 'terminal',
    args: () => ({ command: 'rg -j 1000 helper' }),
    expect: { refused: /at most 4 threads/ },
  },
  {
    name: 'terminal grep repetition bomb',
    tool: 'terminal',
    args: () => ({ command: "grep -E 'a{32767}{32767}' src/app.py" }),
    expect: { refused: /limit exceeded/ },
  },
  {
    name: 'terminal find -regex repetition bomb',
    tool: 'terminal',
    args: () => ({ command: "find . -regex 'a{32767}{32767}'" }),
    expect: { refused: /limit exceeded/ },
  },
  {
    name: 'terminal sed on a 1 GB sparse file',
    tool: 'terminal',
    args: () => ({ command: "sed -n '$p' sparse.bin" }),
    expect: { refused: /binary file/ },
    maxMs: 1500,
  },
  {
    // The link's own text is repository content and is shown; what it names does not exist in the sandbox.
    name: 'terminal ls -l shows link texts, never what they point at',
    tool: 'terminal',
    args: () => ({ command: 'ls -l links' }),
    expect: { bounded: /out-file -> \.\.\/\.\.\/secret\.txt/, status: 'ok' },
  },
  { name: 'terminal find -ls', tool: 'terminal', args: () => ({ command: 'find links -ls' }), expect: { refused: /-ls is not allowed/ } },
  {
    name: 'terminal find -xtype probe',
    tool: 'terminal',
    args: () => ({ command: 'find links -xtype l' }),
    expect: { refused: /-xtype is not allowed/ },
  },
  {
    name: 'grep repetition bomb',
    tool: 'grep',
    args: () => ({ pattern: 'a{32767}{32767}' }),
    expect: { refused: /limit exceeded/ },
    engines: ['rg', 'grep'],
  },
  {
    name: 'glob with a backtracking-bomb pattern',
    tool: 'glob',
    args: () => ({ pattern: `${'*'.repeat(30)}Z` }),
    expect: { bounded: /No files match/, status: 'ok' },
    engines: ['rg', 'grep'],
  },
  {
    name: 'terminal glob word backtracking bomb',
    tool: 'terminal',
    args: () => ({ command: `ls src/${'*'.repeat(30)}Z` }),
    expect: { refused: /no such file/ },
  },
];

describe('sandbox attack corpus', () => {
  it('has at least 60 distinct attacks', () => {
    expect(new Set(ATTACKS.map((a) => a.name)).size).toBe(ATTACKS.length);
    expect(ATTACKS.length).toBeGreaterThanOrEqual(60);
  });

  const cases = ATTACKS.flatMap((attack) =>
    (attack.engines ?? [undefined]).map((engine) => ({ ...attack, engine, label: engine ? `${attack.name} [${engine}]` : attack.name })),
  );
  it.each(cases)('$label', async (attack) => {
    const started = Date.now();
    const result = await runTool(fx.root, attack.tool, attack.args(fx), {
      ...(attack.engine ? { engine: attack.engine } : {}),
      ...(attack.timeoutMs ? { timeoutMs: attack.timeoutMs } : {}),
    });
    const elapsed = Date.now() - started;
    seen.push(result.output, result.message ?? '');
    const text = `${result.output}\n${result.message ?? ''}`;
    const outcome = text.includes(fx.secretToken)
      ? 'escaped'
      : 'refused' in attack.expect
        ? result.status === 'error'
          ? 'refused'
          : 'escaped'
        : 'contained';
    recordAttack(attack.tool, attack.label, outcome);
    expect(result.output.length).toBeLessThanOrEqual(4096);
    expect(`${result.output}\n${result.message ?? ''}`).not.toContain(fx.secretToken);
    if ('refused' in attack.expect) {
      expect(result.status).toBe('error');
      expect(result.message).toMatch(attack.expect.refused);
    } else if ('bounded' in attack.expect) {
      if (attack.expect.status) expect(result.status).toBe(attack.expect.status);
      expect(`${result.output}\n${result.message ?? ''}`).toMatch(attack.expect.bounded);
    }
    expect(elapsed).toBeLessThan(attack.maxMs ?? 2500);
  });

  it('left nothing behind: no file was written and no output ever held the secret', () => {
    expect(existsSync(path.join(fx.root, 'out.txt'))).toBe(false);
    expect(seen.length).toBeGreaterThan(60);
    expect(seen.join('\n')).not.toContain(fx.secretToken);
    // A refused symlink is named as the model wrote it; its target is never echoed.
    const symlinkRefusals = seen.filter((s) => SYMLINK_REFUSAL.test(s));
    expect(symlinkRefusals.length).toBeGreaterThan(5);
    expect(symlinkRefusals.join('\n')).not.toContain(fx.parent);
  });
});
