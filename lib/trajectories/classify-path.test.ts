import { describe, expect, it } from 'vitest';
import { classifyViewedPath } from './classify-path';

const classify = (path: string, observation?: string) => classifyViewedPath(path, path.replace(/\/+$/, ''), observation);

describe('classifyViewedPath', () => {
  it('keeps source files, whatever their extension', () => {
    for (const path of [
      'django/forms/widgets.py',
      'lib/matplotlib/_path.h',
      'setup.cfg',
      'requirements.txt',
      'tests/data/input.txt',
      'src/x.test.ts',
    ]) {
      expect({ path, kind: classify(path) }).toEqual({ path, kind: 'file' });
    }
  });

  it('drops directories: the checkout root, a trailing slash, or a directory listing as the observation', () => {
    expect(classifyViewedPath('/workspace/django__django__4.0', '', undefined)).toBe('directory');
    expect(classify('django/db/')).toBe('directory');
    expect(
      classify(
        'django/db',
        "Here's the files and directories up to 2 levels deep in /workspace/django__django__4.0/django/db, excluding hidden items:\n/workspace/…",
      ),
    ).toBe('directory');
    // A directory with a dot in its name is still caught by the observation.
    expect(classify('astropy/io/ascii.d', "Here's the files and directories up to 2 levels deep in /workspace/x")).toBe('directory');
  });

  it('drops documentation: README*, issue.md, *.md, *.rst anywhere, *.txt under doc/ or docs/', () => {
    for (const path of [
      'README.rst',
      'README',
      'sub/Readme.md',
      'issue.md',
      'CONTRIBUTING.md',
      'doc/faq.rst',
      'CHANGES.rst',
      'docs/releases/3.2.txt',
      'django/docs/topics/x.txt',
      'Doc/index.TXT',
    ]) {
      expect({ path, kind: classify(path) }).toEqual({ path, kind: 'documentation' });
    }
  });

  it('drops extensionless files, dotfiles included', () => {
    for (const path of ['Makefile', 'bin/pylint', '.gitignore', 'LICENSE', 'scripts/run.']) {
      expect({ path, kind: classify(path) }).toEqual({ path, kind: 'extensionless' });
    }
  });
});
