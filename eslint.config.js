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
const WORKFLOW_PURE_LIB = ['errors', 'recipes', 'reports/format', 'training/validation-choice'];

const tests = ['**/*.test.ts', 'test/**', 'bench/**'];

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
  // ---- layering (ARCHITECTURE.md "Rules") ----
  {
    files: ['lib/**/*.ts'],
    ignores: [...LIB_TEMPORAL_ALLOW_LIST, '**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['@temporalio/*'],
              message: 'lib/ never imports Temporal: it is plain code that activities, the CLI and tests call (ARCHITECTURE.md).',
            },
            {
              regex: '^(\\.\\./)+(activities|workflows|workers|cli|test)(/|$)',
              message: 'lib/ depends only on lib/, schemas/ and packages.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['activities/*.ts'],
    ignores: ['activities/index.ts', '**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\./(?!kit(/|$))',
              message: 'activities never import another activity: move the shared code to lib/ (or activities/kit for Temporal glue).',
            },
            {
              regex: '^\\.\\./(workflows|workers|cli)(/|$)',
              message: 'activities import only ./kit, ../lib, ../schemas, node: and packages.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['activities/kit/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { regex: '^\\.\\./(?!\\.\\./)(?!kit(/|$))', message: 'activities/kit is shared by every activity and imports none of them.' },
          ],
        },
      ],
    },
  },
  {
    files: ['cli/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex: '^\\.\\./activities(/(?!kit(/|$)).*)?$',
              message: 'cli/ never imports activities (activities/kit aside): call lib/ directly, or start a workflow.',
            },
          ],
        },
      ],
    },
  },
  {
    files: ['workflows/**/*.ts'],
    ignores: ['**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: NODE_BUILTINS.map((name) => ({ name, message: 'workflow code is deterministic: no I/O, no node builtins.' })),
          patterns: [
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
        },
      ],
    },
  },
);
