import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * ARCHITECTURE.md "Rules, and which the lint checks": each rule the lint claims to check is checked here by
 * planting a violation in a file inside the tree (linted as text under that path with the project's own
 * eslint.config.js, nothing written) and expecting the lint to report it, and a clean file of each layer passes.
 */
const root = path.resolve(import.meta.dirname, '../..');
let eslint: ESLint;

beforeAll(() => {
  eslint = new ESLint({ cwd: root, overrideConfigFile: path.join(root, 'eslint.config.js') });
});

/** The layering findings (import and syntax restrictions) for `code` at `file`, relative to the repository root. */
async function layeringFindings(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages
    .filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === 'no-restricted-syntax' || m.fatal)
    .map((m) => `${m.ruleId}: ${m.message}`);
}

async function allFindings(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

const activity = (name: string) =>
  `export async function ${name}(input: { runDir: string }): Promise<string> {\n  return input.runDir;\n}\n`;

// [rule, planted file, code, what the message says]
const violations: Array<[string, string, string, RegExp]> = [
  [
    'lib/ never imports Temporal',
    'lib/planted/x.ts',
    "import { Client } from '@temporalio/client';\nexport const c = Client;\n",
    /lib\/ never imports Temporal/,
  ],
  [
    'lib/ never imports activities',
    'lib/planted/x.ts',
    "import { mine } from '../../activities/catm-mine';\nexport const m = mine;\n",
    /lib\/ depends only on/,
  ],
  [
    'lib/ never imports workflows',
    'lib/planted/deep/x.ts',
    "import { catm } from '../../../workflows/catm';\nexport const w = catm;\n",
    /lib\/ depends only on/,
  ],
  [
    'lib/ never imports test/',
    'lib/planted/x.ts',
    "import { startWorker } from '../../test/support/temporal';\nexport const s = startWorker;\n",
    /lib\/ depends only on/,
  ],
  [
    'lib/ (lib/config aside) never imports temporal.config.ts',
    'lib/planted/x.ts',
    "import { temporalConfig } from '../../temporal.config';\nexport const t = temporalConfig;\n",
    /temporal\.config\.ts is read by/,
  ],
  [
    'schemas/ imports no lib/',
    'schemas/planted.ts',
    "import { F_BETA } from '../lib/metrics/params';\nexport const b = F_BETA;\n",
    /schemas\/ imports only zod/,
  ],
  [
    'schemas/<folder>/ imports no lib/',
    'schemas/evaluation/planted.ts',
    "import { F_BETA } from '../../lib/metrics/params';\nexport const b = F_BETA;\n",
    /schemas\/ imports only zod/,
  ],
  [
    'schemas/ imports no other package',
    'schemas/planted.ts',
    "import pLimit from 'p-limit';\nexport const l = pLimit;\n",
    /schemas\/ imports only zod/,
  ],
  [
    'schemas/ imports no node: module',
    'schemas/planted.ts',
    "import path from 'node:path';\nexport const p = path;\n",
    /schemas\/ imports only zod/,
  ],
  [
    'schemas/ never imports temporal.config.ts',
    'schemas/planted.ts',
    "import { temporalConfig } from '../temporal.config';\nexport const t = temporalConfig;\n",
    /temporal\.config\.ts is read by|schemas\/ imports only/,
  ],
  [
    'activities never import another activity',
    'activities/planted.ts',
    "import { mine } from './catm-mine';\nexport const m = mine;\n",
    /activities never import another activity/,
  ],
  [
    'activities never import workflows',
    'activities/planted.ts',
    "import { catm } from '../workflows/catm';\nexport const w = catm;\n",
    /activities import only/,
  ],
  [
    'activities/kit imports no activity',
    'activities/kit/planted.ts',
    "import { mine } from '../catm-mine';\nexport const m = mine;\n",
    /activities\/kit is shared/,
  ],
  ['one file per activity (two functions)', 'activities/planted.ts', activity('first') + activity('second'), /one file per activity/],
  [
    'one file per activity (a function and an arrow const)',
    'activities/planted.ts',
    activity('first') + 'export const second = async (input: { runDir: string }) => input.runDir;\n',
    /one file per activity/,
  ],
  [
    'activities read no process.env (their deps carry the environment)',
    'activities/planted.ts',
    'export async function planted(input: { keyEnv: string }): Promise<string> {\n  return process.env[input.keyEnv] ?? "";\n}\n',
    /ActivityDeps\.env/,
  ],
  ['activities/kit reads no process.env', 'activities/kit/planted.ts', 'export const home = process.env.HOME;\n', /ActivityDeps\.env/],
  [
    'activities hold no module state',
    'activities/planted.ts',
    'let client: string | null = null;\nexport function setClient(c: string): void {\n  client = c;\n}\nexport const used = () => client;\n',
    /no module state/,
  ],
  [
    'cli/ never imports activities',
    'cli/planted.ts',
    "import { mine } from '../activities/catm-mine';\nexport const m = mine;\n",
    /cli\/ never imports activities/,
  ],
  [
    'cli/ imports workflows/ only as types',
    'cli/planted.ts',
    "import { pipeline } from '../workflows/pipeline';\nexport const p = pipeline;\n",
    /only as `import type`/,
  ],
  [
    'one process runner: lib/',
    'lib/artifacts/planted.ts',
    "import { spawn } from 'node:child_process';\nexport const s = spawn;\n",
    /through lib\/process/,
  ],
  [
    'one process runner: lib/ (bare name)',
    'lib/sandbox/planted.ts',
    "import { execFile } from 'child_process';\nexport const e = execFile;\n",
    /through lib\/process/,
  ],
  [
    'one process runner: lib/config',
    'lib/config/planted.ts',
    "import { spawn } from 'node:child_process';\nexport const s = spawn;\n",
    /through lib\/process/,
  ],
  [
    'one process runner: activities/',
    'activities/planted.ts',
    "import { spawn } from 'node:child_process';\nexport const s = spawn;\n",
    /through lib\/process/,
  ],
  [
    'one process runner: workers/',
    'workers/planted.ts',
    "import { spawn } from 'node:child_process';\nexport const s = spawn;\n",
    /through lib\/process/,
  ],
  [
    'one process runner: cli/',
    'cli/planted.ts',
    "import { spawn } from 'node:child_process';\nexport const s = spawn;\n",
    /through lib\/process/,
  ],
  [
    'workflows import no node: module',
    'workflows/planted.ts',
    "import { readFileSync } from 'node:fs';\nexport const r = readFileSync;\n",
    /deterministic/,
  ],
  [
    'workflows import no builtin by bare name',
    'workflows/planted.ts',
    "import { readFileSync } from 'fs';\nexport const r = readFileSync;\n",
    /deterministic/,
  ],
  [
    'workflows import no @temporalio/client',
    'workflows/planted.ts',
    "import { Client } from '@temporalio/client';\nexport const c = Client;\n",
    /only @temporalio\/workflow/,
  ],
  [
    'workflows import activities only as types',
    'workflows/planted.ts',
    "import { mine } from '../activities/catm-mine';\nexport const m = mine;\n",
    /`import type` only/,
  ],
  [
    'workflows import non-pure lib/ only as types',
    'workflows/planted.ts',
    "import { codeVersion } from '../lib/artifacts/code-version';\nexport const v = codeVersion;\n",
    /pure modules/,
  ],
  [
    'workflows never import cli/',
    'workflows/planted.ts',
    "import type { RunOptions } from '../cli/run';\nexport type R = RunOptions;\n",
    /never import workers\/ or cli\//,
  ],
];

describe('eslint.config.js enforces ARCHITECTURE.md', () => {
  it.each(violations)('%s: %s is reported', async (_rule, file, code, message) => {
    const findings = await layeringFindings(file, code);
    expect(findings.join('\n')).toMatch(message);
  });

  // A clean file of each layer, with what that layer may import: no finding at all.
  const clean: Array<[string, string]> = [
    [
      'lib/planted/x.ts',
      "import path from 'node:path';\nimport type { ArtifactRef } from '../../schemas/artifact-ref';\nimport { F_BETA } from '../metrics/params';\nexport const f = (r: ArtifactRef) => path.join(r.uri, String(F_BETA));\n",
    ],
    ['lib/config/planted.ts', "import { temporalConfig } from '../../temporal.config';\nexport const q = temporalConfig.taskQueues.gpu;\n"],
    ['lib/process/planted.ts', "import { spawn } from 'node:child_process';\nexport const s = spawn;\n"],
    ['lib/sandbox/spawner/planted.ts', "import { spawn } from 'node:child_process';\nexport const s = spawn;\n"],
    ['cli/dev-server.ts', "import { spawn } from 'node:child_process';\nexport const s = spawn;\n"],
    [
      'schemas/evaluation/planted.ts',
      "import { z } from 'zod';\nimport { Schema } from 'apache-arrow';\nimport { ArtifactRefSchema } from '../artifact-ref';\nexport const S = z.object({ ref: ArtifactRefSchema });\nexport const a = Schema;\n",
    ],
    [
      'activities/planted.ts',
      "import path from 'node:path';\nimport { temporalConfig } from '../temporal.config';\nimport { codeVersion } from '../lib/artifacts/code-version';\nimport { ProgressReporter } from './kit';\nexport const LIMIT = 3;\nexport type Out = string;\n" +
        activity('plantedActivity') +
        'export const used = [path, temporalConfig, codeVersion, ProgressReporter];\n',
    ],
    [
      'activities/planted-factory.ts',
      "import type { ActivityDeps } from './kit';\n" +
        "export function makePlanted(deps: Pick<ActivityDeps, 'env'>): (input: { keyEnv: string }) => Promise<string> {\n" +
        '  return async (input) => deps.env[input.keyEnv] ?? "";\n}\n',
    ],
    [
      'cli/planted.ts',
      "import type { PipelineResult } from '../workflows/pipeline';\nimport { nonRetryable } from '../activities/kit';\nexport type P = PipelineResult;\nexport const n = nonRetryable;\n",
    ],
    [
      'workflows/planted.ts',
      "import { proxyActivities } from '@temporalio/workflow';\nimport type { Activities } from '../activities';\nimport type { ArtifactRef } from '../lib/artifacts';\nimport { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';\nimport { temporalConfig } from '../temporal.config';\nexport const a = proxyActivities<Activities>({ startToCloseTimeout: '1 minute' });\nexport type R = ArtifactRef;\nexport const p = [RUN_ARTIFACTS.catmSamples, temporalConfig.taskQueues.gpu];\n",
    ],
    [
      'test/planted.test.ts',
      "import { spawn } from 'node:child_process';\nimport { mine } from '../activities/catm-mine';\nexport const t = [spawn, mine];\n",
    ],
  ];
  it.each(clean)('clean control %s passes the whole lint', async (file, code) => {
    expect(await allFindings(file, code)).toEqual([]);
  });

  it('the tree as committed has no layering finding in the files the rules name', async () => {
    const results = await eslint.lintFiles([
      'schemas',
      'activities',
      'cli',
      'workers',
      'workflows',
      'lib/config',
      'lib/artifacts',
      'lib/sandbox',
    ]);
    const findings = results.flatMap((r) =>
      r.messages
        .filter((m) => m.ruleId === 'no-restricted-imports' || m.ruleId === 'no-restricted-syntax')
        .map((m) => `${path.relative(root, r.filePath)}:${m.line} ${m.message}`),
    );
    expect(findings).toEqual([]);
  });
});

/** Tracked files under a `fixtures/` folder anywhere but test/fixtures/ (ARCHITECTURE.md: fixtures live there). */
function misplacedFixtures(paths: readonly string[]): string[] {
  return paths.filter((p) => /(^|\/)fixtures\//.test(p) && !p.startsWith('test/fixtures/'));
}

describe('fixtures live in test/fixtures/<concept>/', () => {
  it('a fixture planted beside lib/ code is found, one under test/fixtures is not', () => {
    expect(misplacedFixtures(['lib/patch/fixtures/a.pre', 'test/fixtures/patch/a.pre', 'lib/patch/ground-truth.ts'])).toEqual([
      'lib/patch/fixtures/a.pre',
    ]);
  });

  it('no tracked file is under a fixtures/ folder outside test/fixtures', () => {
    const tracked = execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 }).split('\n');
    expect(tracked.filter((p) => p.startsWith('test/fixtures/')).length).toBeGreaterThan(0);
    expect(misplacedFixtures(tracked)).toEqual([]);
  });
});
