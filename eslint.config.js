// ESLint flat config. `npm run lint` runs it with `prettier --check` and ruff (scripts/lint.sh).
// Two parts: the recommended rule sets of ESLint and typescript-eslint (adjusted below where a default does not
// fit this code; none needed turning off), and the layering rules of ARCHITECTURE.md as `no-restricted-imports`,
// the reason this file exists.
import { builtinModules } from 'node:module';
import { defineConfig } from 'eslint/config';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Node's builtins by their bare names (`fs`, `path`, …); the `node:` spellings are matched by a pattern below.
const NODE_BUILTINS = builtinModules.filter((name) => !name.startsWith('_'));

/**
 * lib/ files that may import @temporalio/* today. Empty: lib/ is plain TypeScript that a test, a bench or the CLI
 * can call without a worker. Add a path here (and say why in ARCHITECTURE.md) only when there is no other way.
 */
const LIB_TEMPORAL_ALLOW_LIST = [];

/**
 * lib/ modules workflow code may import as values: pure functions, no I/O, no clock, no randomness (the workflow
 * sandbox replays them). Everything else from lib/ only as `import type`.
 */
const WORKFLOW_PURE_LIB = ['errors', 'paths/run-artifacts', 'recipes', 'reports/format', 'training/validation-choice'];

const tests = ['**/*.test.ts', 'test/**', 'bench/**'];

/**
 * The files that may start a process with `node:child_process` (ARCHITECTURE.md "one process runner"): lib/process
 * (the process-group runner every other caller goes through), lib/sandbox/spawner (the agent tools' pipelines:
 * one stage's stdout into the next stage's stdin, and the helper that forks off the event loop; see its README),
 * and cli/dev-server.ts (the Temporal dev server, a daemon meant to outlive the CLI). Tests and benches too.
 */
const CHILD_PROCESS_ALLOWED = ['lib/process/**', 'lib/sandbox/spawner/**', 'cli/dev-server.ts'];
const CHILD_PROCESS_MESSAGE = 'start programs through lib/process (startProcessGroup): one process runner (ARCHITECTURE.md).';
const CHILD_PROCESS_PATHS = ['child_process', 'node:child_process'].map((name) => ({ name, message: CHILD_PROCESS_MESSAGE }));

/** Who may import temporal.config.ts: not lib/ (lib/config aside, which fills deployment defaults from it) nor schemas/. */
const TEMPORAL_CONFIG_PATTERN = {
  regex: '^(\\.\\./)+temporal\\.config(\\.ts)?$',
  message: 'temporal.config.ts is read by workers/, cli/, activities/, workflows/ and lib/config only (ARCHITECTURE.md).',
};

/** `no-restricted-imports` with these patterns, and with the child_process ban unless `childProcess` is allowed. */
function restrictImports(patterns, { childProcess = false, paths = [] } = {}) {
  return { 'no-restricted-imports': ['error', { paths: [...paths, ...(childProcess ? [] : CHILD_PROCESS_PATHS)], patterns }] };
}

const LIB_PATTERNS = [
  {
    group: ['@temporalio/*'],
    message: 'lib/ never imports Temporal: it is plain code that activities, the CLI and tests call (ARCHITECTURE.md).',
  },
  {
    regex: '^(\\.\\./)+(activities|workflows|workers|cli|test)(/|$)',
    message: 'lib/ depends only on lib/, schemas/ and packages.',
  },
];

/**
 * schemas/ imports only zod, apache-arrow and other schemas: workflow code imports it, and a schema's default
 * lives with the schema. A relative path may not climb out of schemas/ (one level per folder of depth).
 */
function schemaPatterns(climbOut) {
  return [
    { regex: '^(?!zod$|apache-arrow$|\\.)', message: 'schemas/ imports only zod, apache-arrow and other schemas (ARCHITECTURE.md).' },
    { regex: `^${climbOut}`, message: 'schemas/ imports only zod, apache-arrow and other schemas (ARCHITECTURE.md).' },
  ];
}

/** cli/ never imports activities (kit aside); workflows only as types. */
const CLI_PATTERNS = [
  {
    regex: '^\\.\\./activities(/(?!kit(/|$)).*)?$',
    message: 'cli/ never imports activities (activities/kit aside): call lib/ directly, or start a workflow.',
  },
  {
    regex: '^\\.\\./workflows(/|$)',
    allowTypeImports: true,
    message: 'cli/ starts workflows by type name on a worker; it imports workflows/ only as `import type` (results).',
  },
];

/**
 * Activities take what they need from the worker through `createActivities(deps)` (activities/kit/deps.ts): no
 * `process.env` read inside an activity, no module-level `let` another caller could set.
 */
const ACTIVITY_DEPS_SYNTAX = [
  {
    selector: "MemberExpression[object.name='process'][property.name='env']",
    message: 'activities read the environment from their deps (ActivityDeps.env), read once at worker start (ARCHITECTURE.md).',
  },
  {
    selector: "Program > VariableDeclaration[kind='let'], Program > ExportNamedDeclaration > VariableDeclaration[kind='let']",
    message: 'activities hold no module state: what a worker gives them comes through createActivities(deps) (ARCHITECTURE.md).',
  },
];

/** An exported function, or an exported const bound to one: what the worker registers as an activity. */
const EXPORTED_FUNCTION =
  "ExportNamedDeclaration:matches([declaration.type='FunctionDeclaration'], [declaration.declarations.0.init.type=/FunctionExpression$/])";

export default defineConfig(
  { ignores: ['node_modules/**', 'runs/**', '.tools/**', '.venv/**', '.models/**', 'data/**', '**/*.js', '!eslint.config.js'] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    rules: {
      // TypeScript (strict, noUnusedLocals off) already reports undefined names, with the real types and globals.
      'no-undef': 'off',
      // `_`-prefixed names are deliberately unused (destructuring to drop a key, callback arity).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: tests,
    rules: {
      // Expected messages quote indented Python source; a run of spaces reads as the source does.
      'no-regex-spaces': 'off',
    },
  },
  // ---- layering (ARCHITECTURE.md "Rules"); test/lint/architecture.test.ts plants a violation of each ----
  {
    // Everything not covered by a layer below (schemas/, workers/, temporal.config.ts …): no child_process.
    files: ['**/*.ts'],
    ignores: [...tests, ...CHILD_PROCESS_ALLOWED],
    rules: restrictImports([]),
  },
  {
    files: ['lib/**/*.ts'],
    ignores: [...LIB_TEMPORAL_ALLOW_LIST, ...tests],
    rules: restrictImports([...LIB_PATTERNS, TEMPORAL_CONFIG_PATTERN]),
  },
  {
    files: ['lib/config/**/*.ts'],
    ignores: [...LIB_TEMPORAL_ALLOW_LIST, ...tests],
    rules: restrictImports(LIB_PATTERNS),
  },
  {
    files: ['lib/process/**/*.ts', 'lib/sandbox/spawner/**/*.ts'],
    ignores: [...LIB_TEMPORAL_ALLOW_LIST, ...tests],
    rules: restrictImports([...LIB_PATTERNS, TEMPORAL_CONFIG_PATTERN], { childProcess: true }),
  },
  {
    files: ['schemas/*.ts'],
    ignores: tests,
    rules: restrictImports([...schemaPatterns('\\.\\./'), TEMPORAL_CONFIG_PATTERN]),
  },
  {
    files: ['schemas/*/**/*.ts'],
    ignores: tests,
    rules: restrictImports([...schemaPatterns('\\.\\./\\.\\./'), TEMPORAL_CONFIG_PATTERN]),
  },
  {
    files: ['activities/*.ts'],
    ignores: ['activities/index.ts', ...tests],
    rules: {
      ...restrictImports([
        {
          regex: '^\\./(?!kit(/|$))',
          message: 'activities never import another activity: move the shared code to lib/ (or activities/kit for Temporal glue).',
        },
        {
          regex: '^\\.\\./(workflows|workers|cli)(/|$)',
          message: 'activities import only ./kit, ../lib, ../schemas, node: and packages.',
        },
      ]),
      // One file per activity: a second exported function (the activity, or its `make<Name>(deps)` factory) is a
      // second activity the worker registers.
      'no-restricted-syntax': [
        'error',
        {
          selector: `Program > ${EXPORTED_FUNCTION} ~ ${EXPORTED_FUNCTION}`,
          message: 'one file per activity (ARCHITECTURE.md): move this second activity to its own file, or the helper to lib/.',
        },
        ...ACTIVITY_DEPS_SYNTAX,
      ],
    },
  },
  {
    files: ['activities/kit/**/*.ts'],
    ignores: tests,
    rules: {
      ...restrictImports([
        { regex: '^\\.\\./(?!\\.\\./)(?!kit(/|$))', message: 'activities/kit is shared by every activity and imports none of them.' },
      ]),
      'no-restricted-syntax': ['error', ...ACTIVITY_DEPS_SYNTAX],
    },
  },
  {
    files: ['cli/**/*.ts'],
    ignores: tests,
    rules: restrictImports(CLI_PATTERNS),
  },
  {
    files: ['cli/dev-server.ts'],
    rules: restrictImports(CLI_PATTERNS, { childProcess: true }),
  },
  {
    files: ['workflows/**/*.ts'],
    ignores: tests,
    rules: restrictImports(
      [
        { regex: '^node:', message: 'workflow code is deterministic: no I/O, no node builtins.' },
        {
          regex: '^@temporalio/(client|worker|activity|testing)$',
          message: 'workflow code imports only @temporalio/workflow and @temporalio/common.',
        },
        {
          regex: '^\\.\\./activities(/|$)',
          allowTypeImports: true,
          message: 'workflows use activities through proxyActivities<typeof activities>: `import type` only.',
        },
        {
          regex: `^\\.\\./lib/(?!(${WORKFLOW_PURE_LIB.join('|')})(/|$))`,
          allowTypeImports: true,
          message: `workflows import lib/ values only from the pure modules (${WORKFLOW_PURE_LIB.join(', ')}); others as \`import type\`.`,
        },
        { regex: '^\\.\\./(workers|cli)(/|$)', message: 'workflows never import workers/ or cli/.' },
      ],
      {
        paths: NODE_BUILTINS.map((name) => ({ name, message: 'workflow code is deterministic: no I/O, no node builtins.' })),
        childProcess: true,
      },
    ),
  },
);
