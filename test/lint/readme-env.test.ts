import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

/** Code files tracked by git that mention `name` (Markdown and this test left out). */
function filesReading(name: string): string[] {
  try {
    const out = execFileSync('git', ['grep', '-l', '-F', name, '--', '*.ts', '*.py', '*.sh', '*.js'], { cwd: root, encoding: 'utf8' });
    return out.split('\n').filter((file) => file !== 'test/lint/readme-env.test.ts' && file !== '');
  } catch {
    return []; // git grep exits 1 when nothing matches
  }
}

describe('README "Configuration by environment"', () => {
  const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
  const names = [...new Set(readme.match(/CODEGREP_[A-Z0-9_]*[A-Z0-9]/g) ?? [])].sort();

  it('names variables at all (the scan below would pass on an empty list)', () => {
    expect(names).toContain('CODEGREP_TEMPORAL_ADDRESS');
  });

  it('names only CODEGREP_* variables some code reads (a documented knob that changes nothing is a lie)', () => {
    // Tests may read their own switches (CODEGREP_TEST_*); every other name must appear in product code.
    const unread = names.filter((name) => {
      const readers = filesReading(name);
      const product = readers.filter((file) => !file.endsWith('.test.ts') && !file.startsWith('test/') && !file.startsWith('bench/'));
      return name.startsWith('CODEGREP_TEST_') ? readers.length === 0 : product.length === 0;
    });
    expect(unread).toEqual([]);
  });

  it('the retired CODEGREP_RETRY_* knobs are gone from the code too', () => {
    expect(filesReading('CODEGREP_RETRY_')).toEqual([]);
  });
});
