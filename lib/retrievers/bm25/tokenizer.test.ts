import { describe, expect, it } from 'vitest';
import { tokenize } from './tokenizer';

describe('App. E tokenizer', () => {
  it('splits on whitespace and lower-cases', () => {
    expect(tokenize('Django Admin\tForm\nQuerySet  filter')).toEqual(['django', 'admin', 'form', 'queryset', 'filter']);
  });

  it('keeps [a-z0-9_./] inside tokens: paths and dotted names stay whole (App. E "Path signal")', () => {
    expect(tokenize('see django/contrib/admin/forms.py and django.db.models.Q')).toEqual([
      'see',
      'django/contrib/admin/forms.py',
      'and',
      'django.db.models.q',
    ]);
    expect(tokenize('the ec2 metadata module')).toEqual(['the', 'ec2', 'metadata', 'module']);
  });

  it('strips every other character without splitting on it (no camelCase/snake_case splitting)', () => {
    expect(tokenize('self.assertEqual(a, getUserName) snake_case_name')).toEqual(['self.assertequala', 'getusername', 'snake_case_name']);
    expect(tokenize('File "/usr/lib/x.py", line 12, in <module>')).toEqual(['file', '/usr/lib/x.py', 'line', '12', 'in', 'module']);
    expect(tokenize('naïve café')).toEqual(['nave', 'caf']);
  });

  it('drops tokens shorter than 2 characters after stripping', () => {
    expect(tokenize('a I x, (y) ab 1 12 _ __ .')).toEqual(['ab', '12', '__']);
  });

  it('drops tokens beginning with http, after stripping and lower-casing', () => {
    expect(tokenize('see https://github.com/x/y (https://x.org) HTTP://A.B http httpx HTTPServer xhttp')).toEqual(['see', 'xhttp']);
  });

  it('has no stop words', () => {
    expect(tokenize('the of and is to')).toEqual(['the', 'of', 'and', 'is', 'to']);
  });

  it("splits on Python's str.split() whitespace, not JavaScript's \\s", () => {
    expect(tokenize('foo\u0085bar baz\u001cqux ab\u3000cd')).toEqual(['foo', 'bar', 'baz', 'qux', 'ab', 'cd']);
    expect(tokenize('foo\ufeffbar')).toEqual(['foobar']); // U+FEFF is \s in JavaScript, not whitespace in Python
    expect(tokenize('')).toEqual([]);
    expect(tokenize(' \n\t ')).toEqual([]);
  });
});
