import { promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createEditor, EDITOR_LIMITS, runEditor } from './editor';

let parent: string;
let root: string;
const SECRET = 'SECRET-OUTSIDE-THE-ROOT\n';

beforeEach(async () => {
  parent = await fs.mkdtemp(path.join(os.tmpdir(), 'codegrep-editor-'));
  root = path.join(parent, 'repo');
  await fs.mkdir(path.join(root, 'pkg', 'sub', 'deep', 'deeper'), { recursive: true });
  await fs.mkdir(path.join(parent, 'outside'));
  await fs.writeFile(path.join(parent, 'outside', 'secret.txt'), SECRET);
  await fs.writeFile(path.join(root, 'pkg', 'mod.py'), 'a = 1\nb = 2\na = 1\nc = 3\n');
  await fs.writeFile(path.join(root, 'pkg', 'sub', 'deep', 'deeper', 'far.py'), 'far\n');
  await fs.writeFile(path.join(root, 'noeol.txt'), 'one\ntwo');
  await fs.writeFile(path.join(root, '.hidden'), 'h\n');
  await fs.writeFile(path.join(root, '.git'), 'gitdir: /elsewhere\n');
  await fs.writeFile(path.join(root, 'blob.bin'), Buffer.from([0x61, 0x00, 0x62]));
  await fs.symlink(path.join(parent, 'outside'), path.join(root, 'out-dir'));
  await fs.symlink(path.join(parent, 'outside', 'secret.txt'), path.join(root, 'out-file.txt'));
  await fs.symlink(path.join(parent, 'outside', 'not-yet.txt'), path.join(root, 'dangling.txt'));
  await fs.symlink(path.join(root, 'pkg', 'mod.py'), path.join(root, 'inner-link.py'));
});
afterEach(async () => {
  await fs.rm(parent, { recursive: true, force: true });
});

const edit = (args: Record<string, unknown>) => runEditor(root, args);
const read = (relative: string) => fs.readFile(path.join(root, relative), 'utf8');

describe('str_replace_editor: view', () => {
  it('shows a file with cat -n line numbers, or only a range', async () => {
    expect(await edit({ command: 'view', path: 'pkg/mod.py' })).toEqual({
      status: 'ok',
      output: "Here's the result of running `cat -n` on pkg/mod.py:\n     1\ta = 1\n     2\tb = 2\n     3\ta = 1\n     4\tc = 3\n",
    });
    expect((await edit({ command: 'view', path: 'pkg/mod.py', view_range: [2, 3] })).output).toBe(
      "Here's the result of running `cat -n` on pkg/mod.py (lines 2-3):\n     2\tb = 2\n     3\ta = 1\n",
    );
    expect((await edit({ command: 'view', path: 'pkg/mod.py', view_range: [3, -1] })).output).toContain('     3\ta = 1\n     4\tc = 3\n');
    expect(await edit({ command: 'view', path: 'pkg/mod.py', view_range: [0, 2] })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/first line must be between 1 and 4/),
    });
    expect(await edit({ command: 'view', path: 'pkg/mod.py', view_range: [3, 9] })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/last line must be -1 or between 3 and 4/),
    });
  });

  it('lists a directory two levels deep without hidden entries and without following links', async () => {
    const result = await edit({ command: 'view', path: '.' });
    expect(result.status).toBe('ok');
    const listed = result.output.split('\n').slice(1).filter(Boolean);
    expect(listed).toEqual([
      'blob.bin',
      'dangling.txt',
      'inner-link.py',
      'noeol.txt',
      'out-dir',
      'out-file.txt',
      'pkg/',
      'pkg/mod.py',
      'pkg/sub/',
    ]);
    expect(result.output).not.toContain('.hidden');
    expect(result.output).not.toContain('secret');
    expect(await edit({ command: 'view', path: 'pkg', view_range: [1, 2] })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/only allowed when path is a file/),
    });
  });

  it('clips long output with a note', async () => {
    await fs.writeFile(path.join(root, 'long.txt'), 'x'.repeat(100) + '\n'.repeat(1) + 'y\n'.repeat(20_000));
    const result = await edit({ command: 'view', path: 'long.txt' });
    expect(result.status).toBe('truncated');
    expect(result.output.length).toBeLessThan(EDITOR_LIMITS.maxOutputChars + 300);
    expect(result.output).toContain('<response clipped>');
  });
});

describe('str_replace_editor: edits', () => {
  it('str_replace needs exactly one match and says where the others are', async () => {
    expect(await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'b = 2', new_str: 'b = 20' })).toMatchObject({
      status: 'ok',
      output: expect.stringContaining('     2\tb = 20'),
    });
    expect(await read('pkg/mod.py')).toBe('a = 1\nb = 20\na = 1\nc = 3\n');
    expect(await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'a = 1', new_str: 'a = 9' })).toEqual({
      status: 'error',
      output: '',
      message: 'No replacement was performed. Multiple occurrences of old_str `a = 1` in lines [1, 3]. Please ensure it is unique.',
    });
    expect(await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'z = 0', new_str: 'z = 1' })).toMatchObject({
      status: 'error',
      message: 'No replacement was performed, old_str `z = 0` did not appear verbatim in pkg/mod.py.',
    });
    expect(await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'c = 3', new_str: 'c = 3' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/must be different/),
    });
    expect(await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: '' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/non-empty old_str/),
    });
    // new_str left out deletes old_str.
    await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'c = 3\n' });
    expect(await read('pkg/mod.py')).toBe('a = 1\nb = 20\na = 1\n');
    // Never through a link, not even one that stays inside the root: the file is edited by its own path.
    expect(await edit({ command: 'str_replace', path: 'inner-link.py', old_str: 'b = 20', new_str: 'b = 21' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/inner-link\.py is a symlink; the editor never writes through symlinks/),
    });
    expect(await read('pkg/mod.py')).toBe('a = 1\nb = 20\na = 1\n');
    expect((await fs.lstat(path.join(root, 'inner-link.py'))).isSymbolicLink()).toBe(true);
  });

  it('insert puts text after the given line (0 = top) and keeps a missing final newline', async () => {
    await edit({ command: 'insert', path: 'pkg/mod.py', insert_line: 0, new_str: '# top' });
    await edit({ command: 'insert', path: 'pkg/mod.py', insert_line: 2, new_str: 'x = 0\ny = 0\n' });
    await edit({ command: 'insert', path: 'pkg/mod.py', insert_line: 7, new_str: '# end' });
    expect(await read('pkg/mod.py')).toBe('# top\na = 1\nx = 0\ny = 0\nb = 2\na = 1\nc = 3\n# end\n');
    await edit({ command: 'insert', path: 'noeol.txt', insert_line: 1, new_str: 'middle' });
    expect(await read('noeol.txt')).toBe('one\nmiddle\ntwo');
    expect(await edit({ command: 'insert', path: 'pkg/mod.py', insert_line: 99, new_str: 'x' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/between 0 and 8/),
    });
    expect(await edit({ command: 'insert', path: 'pkg/mod.py', new_str: 'x' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/needs insert_line/),
    });
  });

  it('create makes new files (and parent directories) but never overwrites', async () => {
    expect(await edit({ command: 'create', path: 'pkg/new/module.py', file_text: 'NEW = 1\n' })).toEqual({
      status: 'ok',
      output: 'File created successfully at: pkg/new/module.py',
    });
    expect(await read('pkg/new/module.py')).toBe('NEW = 1\n');
    expect(await edit({ command: 'create', path: 'pkg/mod.py', file_text: 'gone' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/File already exists at: pkg\/mod.py/),
    });
    expect(await read('pkg/mod.py')).toBe('a = 1\nb = 2\na = 1\nc = 3\n');
    // An absolute path inside the root is fine.
    expect((await edit({ command: 'create', path: path.join(root, 'abs.py'), file_text: '' })).status).toBe('ok');
    expect(await edit({ command: 'create', path: 'x.py' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/needs file_text/),
    });
  });

  it('refuses binary files and bad arguments', async () => {
    expect(await edit({ command: 'view', path: 'blob.bin' })).toMatchObject({ status: 'error', message: expect.stringMatching(/binary/) });
    expect(await edit({ command: 'str_replace', path: 'blob.bin', old_str: 'a', new_str: 'c' })).toMatchObject({ status: 'error' });
    expect(await edit({ command: 'delete', path: 'pkg/mod.py' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/invalid arguments.*command/),
    });
    expect(await runEditor(root, '{"command": "view",')).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/not valid JSON/),
    });
    expect(await edit({ command: 'view', path: 'pkg/mod.py', view_range: null })).toMatchObject({ status: 'ok' });
  });
});

describe('str_replace_editor: path attacks', () => {
  const outsideUnchanged = async () => {
    expect(await fs.readFile(path.join(parent, 'outside', 'secret.txt'), 'utf8')).toBe(SECRET);
    expect((await fs.readdir(path.join(parent, 'outside'))).sort()).toEqual(['secret.txt']);
    expect((await fs.readdir(parent)).sort()).toEqual(['outside', 'repo']);
  };

  it.each([
    ['../ climbing out', '../outside/secret.txt'],
    ['.. inside a longer path', 'pkg/../../outside/secret.txt'],
    ['an absolute path outside the root', '<parent>/outside/secret.txt'],
    ['/etc/passwd', '/etc/passwd'],
    ['a symlink to an outside file', 'out-file.txt'],
    ['a path through a symlinked outside directory', 'out-dir/secret.txt'],
  ])('refuses %s for every command', async (_what, given) => {
    const target = given.replace('<parent>', parent);
    for (const args of [
      { command: 'view', path: target },
      { command: 'str_replace', path: target, old_str: 'SECRET', new_str: 'PWNED' },
      { command: 'insert', path: target, insert_line: 0, new_str: 'PWNED' },
      { command: 'create', path: target, file_text: 'PWNED' },
    ]) {
      const result = await edit(args);
      expect(result.status, `${args.command} ${target}`).toBe('error');
      expect(result.output + (result.message ?? '')).not.toContain('SECRET-OUTSIDE');
    }
    await outsideUnchanged();
  });

  it('refuses to create through a symlinked directory, onto a dangling link, or above the root', async () => {
    for (const target of ['out-dir/new.py', 'out-dir/nested/new.py', 'dangling.txt', '../new.py', path.join(parent, 'new.py')]) {
      const result = await edit({ command: 'create', path: target, file_text: 'PWNED' });
      expect(result.status, target).toBe('error');
    }
    await expect(fs.lstat(path.join(parent, 'outside', 'not-yet.txt'))).rejects.toThrow(/ENOENT/);
    await outsideUnchanged();
  });

  it('refuses .git', async () => {
    expect(await edit({ command: 'view', path: '.git' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/inside \.git/),
    });
    expect(await edit({ command: 'str_replace', path: '.git', old_str: 'elsewhere', new_str: 'x' })).toMatchObject({ status: 'error' });
    expect(await edit({ command: 'create', path: '.git/hooks/pre-commit', file_text: 'x' })).toMatchObject({ status: 'error' });
    expect(await read('.git')).toBe('gitdir: /elsewhere\n');
  });
});

describe('str_replace_editor: limits, isolation and one writer per file', () => {
  it('counts creates per episode: createEditor keeps the count, each runEditor call is an episode of its own', async () => {
    const editor = createEditor(root, { limits: { maxCreatedFilesPerEpisode: 2 } });
    expect((await editor.run({ command: 'create', path: 'n/1.py', file_text: '1' })).status).toBe('ok');
    // A refused create does not count.
    expect((await editor.run({ command: 'create', path: 'pkg/mod.py', file_text: 'x' })).status).toBe('error');
    expect((await editor.run({ command: 'create', path: 'n/2.py', file_text: '2' })).status).toBe('ok');
    expect(await editor.run({ command: 'create', path: 'n/3.py', file_text: '3' })).toMatchObject({
      status: 'error',
      message: expect.stringMatching(/already created 2 files, the editor's limit \(2\)/),
    });
    expect(editor.createdFiles()).toBe(2);
    expect(
      (await runEditor(root, { command: 'create', path: 'n/4.py', file_text: '4' }, { limits: { maxCreatedFilesPerEpisode: 2 } })).status,
    ).toBe('ok');
  });

  it('an edit keeps the file mode and leaves no temporary file behind', async () => {
    await fs.chmod(path.join(root, 'pkg', 'mod.py'), 0o755);
    expect((await edit({ command: 'str_replace', path: 'pkg/mod.py', old_str: 'c = 3', new_str: 'c = 4' })).status).toBe('ok');
    expect((await fs.stat(path.join(root, 'pkg', 'mod.py'))).mode & 0o777).toBe(0o755);
    expect((await fs.readdir(path.join(root, 'pkg'))).sort()).toEqual(['mod.py', 'sub']);
  });

  it('filter-only isolation writes in-process behind the same guard', async () => {
    const editor = createEditor(root, { isolation: 'filter-only' });
    expect((await editor.run({ command: 'create', path: 'fo/new.py', file_text: 'X = 1\n' })).status).toBe('ok');
    expect((await editor.run({ command: 'insert', path: 'fo/new.py', insert_line: 1, new_str: 'Y = 2' })).status).toBe('ok');
    expect(await read('fo/new.py')).toBe('X = 1\nY = 2\n');
    expect((await editor.run({ command: 'create', path: 'out-dir/x.py', file_text: 'PWNED' })).status).toBe('error');
  });

  it('the limits are named, and a created file can always be viewed', () => {
    expect(EDITOR_LIMITS.maxFileBytes).toBeGreaterThanOrEqual(EDITOR_LIMITS.maxEditStringBytes);
    expect(EDITOR_LIMITS).toMatchObject({ maxCreatedFilesPerEpisode: 500, maxFileBytes: 4 * 1024 * 1024, maxEditStringBytes: 256 * 1024 });
  });
});
