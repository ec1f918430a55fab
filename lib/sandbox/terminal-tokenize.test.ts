import { describe, expect, it } from 'vitest';
import { tokenize } from './terminal-tokenize';

const texts = (command: string) => {
  const r = tokenize(command);
  if (!r.ok) throw new Error(r.message);
  return r.pipeline.map((stage) => stage.map((w) => w.text));
};

describe('tokenize', () => {
  it.each<[string, string[][]]>([
    ['rg -n foo src', [['rg', '-n', 'foo', 'src']]],
    ["rg 'def foo(' src", [['rg', 'def foo(', 'src']]],
    ['rg "a b" "c\\"d" "e\\\\f" "g\\h"', [['rg', 'a b', 'c"d', 'e\\f', 'g\\h']]],
    ['rg a\\ b c\\|d', [['rg', 'a b', 'c|d']]],
    ['rg \'end$\' "x$" y$', [['rg', 'end$', 'x$', 'y$']]],
    [
      'rg -n foo | head -5 | wc -l',
      [
        ['rg', '-n', 'foo'],
        ['head', '-5'],
        ['wc', '-l'],
      ],
    ],
    ['rg foo|head', [['rg', 'foo'], ['head']]],
    ["find . -name '*.py' \\( -type f \\)", [['find', '.', '-name', '*.py', '(', '-type', 'f', ')']]],
    ["rg ''", [['rg', '']]],
    ['rg \'a\'"b"c', [['rg', 'abc']]],
    ['rg  \t x', [['rg', 'x']]],
    ["rg '#notacomment' a#b", [['rg', '#notacomment', 'a#b']]],
  ])('%s', (command, expected) => {
    expect(texts(command)).toEqual(expected);
  });

  it('marks only unquoted glob characters for expansion', () => {
    const r = tokenize('ls src/*.py \'*.md\' "?" a\\*b c[ab]');
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.pipeline[0]!.map((w) => w.glob)).toEqual([null, 'src/*.py', null, null, null, 'c[ab]']);
    const mixed = tokenize("ls 'a*'*");
    expect(mixed.ok && mixed.pipeline[0]![1]!.glob).toBe('a\\**');
  });

  it.each<[string, RegExp]>([
    ['rg x; id', /';' is not allowed/],
    ['rg x && id', /'&&' is not allowed/],
    ['rg x || id', /'\|\|' is not allowed/],
    ['rg x & id', /background/],
    ['rg x > f', /redirection '>'/],
    ['rg x 2>/dev/null', /redirection '>'/],
    ['rg x < f', /redirection '<'/],
    ['rg $(id)', /\$\(\.\.\.\)/],
    ['rg "$(id)"', /\$\(\.\.\.\)/],
    ['rg ${HOME}', /variables/],
    ['rg "$HOME"', /variables/],
    ['rg `id`', /backticks/],
    ['rg "`id`"', /backticks/],
    ['(rg x)', /no subshells/],
    ['rg x\nid', /newlines/],
    ["rg 'x\ny'", /newlines/],
    ['rg x #comment', /comments/],
    ['cat ~/.ssh/id_rsa', /'~' expansion/],
    ["rg 'x", /unterminated single quote/],
    ['rg "x', /unterminated double quote/],
    ['rg x\\', /lone backslash/],
    ['| rg x', /needs a command on both sides/],
    ['rg x |', /needs a command on both sides/],
    ['rg x | | wc', /needs a command on both sides/],
    ['   ', /empty/],
  ])('refuses %j', (command, message) => {
    const r = tokenize(command);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.message).toMatch(message);
  });
});
