import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { compileCommand, splitCommandLine } from './command-template';

describe('command templates', () => {
  it('splits like a shell would, without expanding anything', () => {
    expect(splitCommandLine(`python -m run  --out "{output_dir}" 'a b' c\\ d "x\\"y" '$HOME' ""`)).toEqual([
      'python',
      '-m',
      'run',
      '--out',
      '{output_dir}',
      'a b',
      'c d',
      'x"y',
      '$HOME',
      '',
    ]);
    expect(() => splitCommandLine('run "unclosed')).toThrow(/unclosed " quote/);
    expect(() => splitCommandLine('run \\')).toThrow(/lone backslash/);
  });

  it('substitutes each placeholder inside its own argument, never adding arguments', () => {
    const command = compileCommand(`oh --id={instance_id} --prompt {prompt_file} --json '{{"k": 1}}'`, ['instance_id', 'prompt_file']);
    const hostile = 'x; rm -rf ~ && $(touch pwned) `id` "quoted" \'single\'\n--flag';
    const argv = command.render({ instance_id: hostile, prompt_file: '/tmp/a dir/prompt file.txt' });
    expect(argv).toEqual(['oh', `--id=${hostile}`, '--prompt', '/tmp/a dir/prompt file.txt', '--json', '{"k": 1}']);
    expect([...command.placeholders].sort()).toEqual(['instance_id', 'prompt_file']);
    // A real program receives exactly those arguments.
    const received = execFileSync(
      process.execPath,
      ['-e', 'process.stdout.write(JSON.stringify(process.argv.slice(1)))', '--', ...argv.slice(1)],
      { encoding: 'utf8' },
    );
    expect(JSON.parse(received)).toEqual(argv.slice(1));
  });

  it('takes an argument array as is, and refuses unknown or unbalanced placeholders', () => {
    expect(compileCommand(['{interpreter}', 'a b', '{test}'], ['interpreter', 'test']).render({ interpreter: 'py', test: 't 1' })).toEqual([
      'py',
      'a b',
      't 1',
    ]);
    expect(() => compileCommand('run {nope}', ['instance_id'])).toThrow(/unknown placeholder \{nope\}; known: \{instance_id\}/);
    expect(() => compileCommand('run {instance_id', ['instance_id'])).toThrow(/"\{" without "\}"/);
    expect(() => compileCommand('run x}', ['instance_id'])).toThrow(/"\}" without "\{"/);
    expect(() => compileCommand('', ['instance_id'])).toThrow(/empty/);
    expect(() => compileCommand('run {instance_id}', ['instance_id']).render({})).toThrow(/no value for \{instance_id\}/);
  });
});
