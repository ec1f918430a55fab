import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { seededRandom } from '../metrics/seeded-random';
import { runProgram } from './run-program';

/**
 * The learnable task ("component repos"; the trainer's pytest has a Python twin of the
 * same design): seeded synthetic Python repositories, each with the same 8 component files `src/<component>.py`
 * plus distractors (README, tests/, utils.py), seeded function names and bodies. An instance's issue names a
 * component and a function defined in its file; its gold patch edits exactly that function. A policy solves it
 * by grepping the function name and answering the file, or by learning component word -> path. `componentWeights`
 * makes some components break more often than others (a prior a policy can learn: see `LEARN_COMPONENT_WEIGHTS`
 * in bench/learn.ts for why the bench and the demo use one). Real git repos,
 * mirrored as `<mirrorDir>/<owner>__<name>.git` for the environment stage's `mirror-dir` repo source, and
 * SWE-bench-style instances whose patches are real `git diff`s.
 */

export const COMPONENTS = ['parser', 'render', 'cache', 'config', 'network', 'storage', 'schedule', 'auth'] as const;
const VERBS = ['refresh', 'load', 'parse', 'flush', 'merge', 'resolve', 'encode', 'decode', 'fetch', 'store', 'compute', 'update'];
const NOUNS = ['bucket', 'token', 'entry', 'frame', 'record', 'packet', 'window', 'block', 'queue', 'field'];
const SYMPTOMS = [
  'returns a stale value after the second call',
  'gives a result that is off by one',
  'ignores its count argument',
  'raises on an empty input instead of returning zero',
];
// Enough that a repository can have several issues in its most frequently broken component.
const FUNCTIONS_PER_COMPONENT = 8;

export interface ComponentInstance {
  instance_id: string;
  repo: string;
  base_commit: string;
  problem_statement: string;
  patch: string;
  /** Not SWE-bench fields: what the gold patch edits, for tests and the bench's report. */
  gold_file: string;
  gold_function: string;
}

const gitEnv = {
  ...process.env,
  GIT_AUTHOR_NAME: 'codegrep learn',
  GIT_AUTHOR_EMAIL: 'learn@codegrep.invalid',
  GIT_COMMITTER_NAME: 'codegrep learn',
  GIT_COMMITTER_EMAIL: 'learn@codegrep.invalid',
  GIT_AUTHOR_DATE: '2026-01-01T00:00:00Z',
  GIT_COMMITTER_DATE: '2026-01-01T00:00:00Z',
};
const git = async (cwd: string, ...args: string[]) => (await runProgram('git', args, { cwd, env: gitEnv })).trim();

function pick<T>(random: () => number, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)]!;
}

/** A component drawn with probability proportional to its weight (1 for a component the weights leave out). */
function pickComponent(random: () => number, weights: Partial<Record<string, number>>): string {
  const w = COMPONENTS.map((c) => weights[c] ?? 1);
  let u = random() * w.reduce((a, b) => a + b, 0);
  for (let k = 0; k < COMPONENTS.length; k++) if ((u -= w[k]!) < 0) return COMPONENTS[k]!;
  return COMPONENTS.at(-1)!;
}

function functionSource(name: string, random: () => number): string {
  const add = 1 + Math.floor(random() * 9);
  const times = 2 + Math.floor(random() * 7);
  return `def ${name}(value, count=${add}):\n    total = value + count\n    return total * ${times}\n`;
}

/** One repository's files: function names unique within the repo, every component with its own. */
function repoFiles(random: () => number): { files: Map<string, string>; functions: Map<string, string[]> } {
  const used = new Set<string>();
  const fresh = () => {
    for (;;) {
      const name = `${pick(random, VERBS)}_${pick(random, NOUNS)}_${Math.floor(random() * 100)}`;
      if (!used.has(name)) {
        used.add(name);
        return name;
      }
    }
  };
  const files = new Map<string, string>();
  const functions = new Map<string, string[]>();
  for (const component of COMPONENTS) {
    const names = Array.from({ length: FUNCTIONS_PER_COMPONENT }, fresh);
    functions.set(component, names);
    files.set(`src/${component}.py`, `"""The ${component} component."""\n\n\n` + names.map((n) => functionSource(n, random)).join('\n\n'));
  }
  files.set('src/__init__.py', '');
  const helpers = Array.from({ length: 2 }, fresh);
  files.set('utils.py', helpers.map((n) => functionSource(n, random)).join('\n\n'));
  files.set('tests/test_basic.py', 'def test_nothing():\n    assert True\n');
  files.set('README.md', `# components\n\nA synthetic repository of ${COMPONENTS.length} components.\n`);
  return { files, functions };
}

/**
 * `repos` repositories named `<owner>/components-<seed>-<r>`, `instancesPerRepo` instances each (distinct
 * functions of the base commit). The same seed gives the same files, names, issues and patches.
 */
export async function generateComponentRepos(options: {
  root: string;
  mirrorDir: string;
  seed: number;
  repos: number;
  instancesPerRepo: number;
  owner?: string;
  /** How often each component is the broken one, relative (default: all equally often). */
  componentWeights?: Partial<Record<(typeof COMPONENTS)[number], number>>;
}): Promise<ComponentInstance[]> {
  const owner = options.owner ?? 'learn';
  const instances: ComponentInstance[] = [];
  const capacity = COMPONENTS.length * FUNCTIONS_PER_COMPONENT;
  if (options.instancesPerRepo > capacity)
    throw new Error(`instancesPerRepo ${options.instancesPerRepo}: a repository has only ${capacity} functions to break`);
  mkdirSync(options.mirrorDir, { recursive: true });
  for (let r = 0; r < options.repos; r++) {
    const random = seededRandom(options.seed * 1000 + r);
    const name = `components-${options.seed}-${r}`;
    const work = path.join(options.root, `${owner}-${name}-src`);
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    await git(work, 'init', '-q', '-b', 'main');
    const { files, functions } = repoFiles(random);
    for (const [file, text] of files) {
      mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
      writeFileSync(path.join(work, file), text);
    }
    await git(work, 'add', '-A');
    await git(work, 'commit', '-q', '-m', `${name}: components`);
    const base = await git(work, 'rev-parse', 'HEAD');
    const chosen = new Set<string>();
    for (let i = 0; i < options.instancesPerRepo; i++) {
      // A component by weight, then one of its functions no earlier instance of this repository used (a
      // component with none left is drawn again), so the components' mix follows the weights.
      let component: string;
      let unused: string[];
      do {
        component = pickComponent(random, options.componentWeights ?? {});
        unused = functions.get(component)!.filter((f) => !chosen.has(f));
      } while (unused.length === 0);
      const fn = pick(random, unused);
      chosen.add(fn);
      const file = `src/${component}.py`;
      const full = path.join(work, file);
      const original = readFileSync(full, 'utf8');
      const start = original.indexOf(`def ${fn}(`);
      const end = original.indexOf('\n\n', start);
      const body = original.slice(start, end === -1 ? undefined : end);
      writeFileSync(full, original.replace(body, body.replace(/return total \* (\d+)/, 'return total * $1 + 1')));
      const patch = (await git(work, 'diff', '--no-color')) + '\n';
      await git(work, 'checkout', '-q', '--', '.');
      instances.push({
        instance_id: `${owner}__${name}-${i + 1}`,
        repo: `${owner}/${name}`,
        base_commit: base,
        problem_statement: `The ${component} component is broken: \`${fn}\` ${pick(random, SYMPTOMS)}.`,
        patch,
        gold_file: file,
        gold_function: fn,
      });
    }
    const mirror = path.join(options.mirrorDir, `${owner}__${name}.git`);
    rmSync(mirror, { recursive: true, force: true });
    await git(options.root, 'clone', '-q', '--bare', work, mirror);
  }
  return instances;
}
