import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'codegrep tests',
  GIT_AUTHOR_EMAIL: 'tests@codegrep.invalid',
  GIT_COMMITTER_NAME: 'codegrep tests',
  GIT_COMMITTER_EMAIL: 'tests@codegrep.invalid',
};

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: gitEnv, encoding: 'utf8' }).trim();
}

export interface FixtureInstance {
  instance_id: string;
  repo: string;
  base_commit: string;
  problem_statement: string;
  patch: string;
}

/**
 * A small real Python repository built with git, mirrored as `<mirrorDir>/<owner>__<name>.git`, and SWE-bench
 * style instances whose gold patches are real `git diff`s against its commits.
 */
export function buildFixtureRepo(root: string, mirrorDir: string, repo = 'acme/widgets'): FixtureInstance[] {
  const [owner, name] = repo.split('/') as [string, string];
  const work = path.join(root, `${owner}-${name}-src`);
  mkdirSync(path.join(work, 'widgets'), { recursive: true });
  mkdirSync(path.join(work, 'tests'), { recursive: true });
  git(root, 'init', '-q', '-b', 'main', work);
  const write = (file: string, text: string) => writeFileSync(path.join(work, file), text);

  write('widgets/__init__.py', 'from .gears import Gear\n');
  write(
    'widgets/gears.py',
    [
      'import math',
      '',
      'TEETH_DEFAULT = 12',
      '',
      'class Gear:',
      '    ratio = 1.0',
      '',
      '    def __init__(self, teeth=TEETH_DEFAULT):',
      '        self.teeth = teeth',
      '',
      '    def circumference(self, module):',
      '        return math.pi * module * self.teeth',
      '',
      '    @property',
      '    def size(self):',
      '        return self.teeth',
      '',
      '',
      'def mesh(a, b):',
      '    def ratio(x, y):',
      '        return x.teeth / y.teeth',
      '    return ratio(a, b)',
      '',
    ].join('\n'),
  );
  write('tests/test_gears.py', 'from widgets import Gear\n\n\ndef test_size():\n    assert Gear(10).size == 10\n');
  write('README.md', '# widgets\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'widgets: gears');
  const first = git(work, 'rev-parse', 'HEAD');

  write('widgets/belts.py', 'def belt_length(a, b, distance):\n    return 2 * distance + (a + b) / 2\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', 'widgets: belts');
  const second = git(work, 'rev-parse', 'HEAD');

  // Gold patch 1 (against the first commit): a method and a nested function change.
  const gears = path.join(work, 'widgets/gears.py');
  git(work, 'checkout', '-q', first);
  const original = execFileSync('cat', [gears], { encoding: 'utf8' });
  writeFileSync(
    gears,
    original
      .replace('return math.pi * module * self.teeth', 'return 2 * math.pi * module * self.teeth / 2')
      .replace('return x.teeth / y.teeth', 'return x.teeth / max(y.teeth, 1)'),
  );
  const patchOne = git(work, 'diff', '--no-color') + '\n';
  git(work, 'checkout', '-q', '--', '.');

  // Gold patch 2 (against the second commit): the belts module.
  git(work, 'checkout', '-q', second);
  writeFileSync(path.join(work, 'widgets/belts.py'), 'def belt_length(a, b, distance):\n    return 2 * distance + (a + b) * 3.14159 / 2\n');
  const patchTwo = git(work, 'diff', '--no-color') + '\n';
  git(work, 'checkout', '-q', '--', '.');
  git(work, 'checkout', '-q', 'main');

  mkdirSync(mirrorDir, { recursive: true });
  git(root, 'clone', '-q', '--bare', work, path.join(mirrorDir, `${owner}__${name}.git`));
  return [
    {
      instance_id: `${owner}__${name}-1`,
      repo,
      base_commit: first,
      problem_statement: 'Gear.circumference is wrong and mesh() divides by zero for a gear without teeth.',
      patch: patchOne,
    },
    {
      instance_id: `${owner}__${name}-2`,
      repo,
      base_commit: second,
      problem_statement: 'belt_length ignores the pulley circumference.',
      patch: patchTwo,
    },
  ];
}
