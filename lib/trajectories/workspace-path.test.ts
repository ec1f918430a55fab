import { describe, expect, it } from 'vitest';
import { resolveWorkspacePath } from './workspace-path';

describe('resolveWorkspacePath', () => {
  it('strips the /workspace/<owner>__<name>__<version>/ checkout prefix of the row repo', () => {
    expect(resolveWorkspacePath('/workspace/django__django__4.0/django/forms/boundfield.py', 'django/django')).toEqual({
      kind: 'inRepo',
      relativePath: 'django/forms/boundfield.py',
      workspaceDir: 'django__django__4.0',
    });
    expect(resolveWorkspacePath('/workspace/pydata__xarray__2022.06/xarray/core/dataset.py', 'pydata/xarray')).toMatchObject({
      kind: 'inRepo',
      relativePath: 'xarray/core/dataset.py',
    });
    expect(resolveWorkspacePath('/workspace/sphinx-doc__sphinx__4.1/sphinx/ext/autodoc/__init__.py', 'sphinx-doc/sphinx')).toMatchObject({
      relativePath: 'sphinx/ext/autodoc/__init__.py',
    });
  });

  it('normalises . and .. segments, doubled and trailing slashes', () => {
    expect(resolveWorkspacePath('/workspace/django__django__4.0/./django//db/../forms/widgets.py', 'django/django')).toMatchObject({
      kind: 'inRepo',
      relativePath: 'django/forms/widgets.py',
    });
    expect(resolveWorkspacePath('/workspace/django__django__4.0/django/', 'django/django')).toMatchObject({ relativePath: 'django' });
    expect(resolveWorkspacePath('/workspace/django__django__4.0', 'django/django')).toMatchObject({ kind: 'inRepo', relativePath: '' });
  });

  it('refuses paths outside the checkout: scratch files, other folders, relative paths, escapes', () => {
    for (const path of [
      '/workspace/reproduce.py',
      '/workspace/test_sympy/sympy/matrices/expressions/tests/test_blockmatrix.py',
      '/tmp/django__django__4.0/x.py',
      'django/forms/widgets.py',
      '/workspace/django__django__4.0/../reproduce.py',
      '/workspace',
    ]) {
      expect({ path, result: resolveWorkspacePath(path, 'django/django') }).toEqual({ path, result: { kind: 'outsideRepo' } });
    }
  });

  it('flags a checkout of another repository than the row says', () => {
    expect(resolveWorkspacePath('/workspace/sympy__sympy__1.6/sympy/core/basic.py', 'django/django')).toEqual({
      kind: 'repoMismatch',
      workspaceDir: 'sympy__sympy__1.6',
    });
    // A prefix of the right name is not the right repository.
    expect(resolveWorkspacePath('/workspace/django__django-stubs__1.0/x.py', 'django/django')).toMatchObject({ kind: 'repoMismatch' });
  });

  it('matches owner and name case-insensitively, as GitHub does', () => {
    expect(resolveWorkspacePath('/workspace/PyCQA__pylint__2.10/pylint/lint.py', 'pycqa/pylint')).toMatchObject({
      kind: 'inRepo',
      relativePath: 'pylint/lint.py',
    });
  });
});
