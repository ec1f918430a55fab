import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { hashConfig, writeParquetArtifact } from '../artifacts';
import { groundTruthForPatch } from '../patch/ground-truth';
import { ENVIRONMENT_SAMPLES_SCHEMA_NAME, ENVIRONMENT_SAMPLES_SCHEMA_VERSION, environmentSamplesArrowSchema } from '../../schemas/environment';
import { groundTruthToColumns, type GroundTruth } from '../../schemas/ground-truth';
import type { ArtifactRef } from '../../schemas/artifact-ref';
import { buildFixtureRepo, git, type FixtureInstance } from '../../test/support/fixture-repos';

/**
 * For the environment server tests: the real fixture repository of test/support/fixture-repos.ts (git, two
 * commits, two SWE-bench style instances with real gold patches), a real git worktree per instance, ground
 * truth derived from the patches by lib/patch (tree-sitter), and an environment samples Parquet shaped exactly
 * as the environment stage writes it. Instance 1 also has a retained CATM file (widgets/__init__.py), so
 * G(x) is larger than the patch's files.
 */
export interface EnvFixture {
  root: string;
  instances: FixtureInstance[];
  /** Worktree of each instance, by instance id. */
  worktrees: Record<string, string>;
  truths: Record<string, GroundTruth>;
  rows: Record<string, unknown>[];
  samples: ArtifactRef;
  cleanup(): void;
}

export const CATM_FILE = 'widgets/__init__.py';

export async function buildEnvFixture(extraRows: (base: Record<string, unknown>[]) => Record<string, unknown>[] = () => []): Promise<EnvFixture> {
  const root = mkdtempSync(path.join(os.tmpdir(), 'codegrep-envserver-'));
  const instances = buildFixtureRepo(root, path.join(root, 'mirrors'));
  const source = path.join(root, 'acme-widgets-src');
  const worktrees: Record<string, string> = {};
  const truths: Record<string, GroundTruth> = {};
  const rows: Record<string, unknown>[] = [];
  mkdirSync(path.join(root, 'worktrees'));
  for (const instance of instances) {
    const worktree = path.join(root, 'worktrees', instance.instance_id);
    git(source, 'worktree', 'add', '-q', '--detach', worktree, instance.base_commit);
    worktrees[instance.instance_id] = worktree;
    const truth = await groundTruthForPatch(instance.patch, async (file) => {
      try {
        return execFileSync('git', ['-C', worktree, 'cat-file', 'blob', `HEAD:${file}`], { encoding: 'utf8' });
      } catch {
        return null;
      }
    });
    truths[instance.instance_id] = truth;
    const withCatm = instance.instance_id.endsWith('-1');
    rows.push({
      instanceId: instance.instance_id,
      repo: instance.repo,
      baseCommit: instance.base_commit,
      problemStatement: instance.problem_statement,
      goldFiles: truth.files,
      catmFiles: withCatm ? [{ path: CATM_FILE, weight: 1.2, trajectoryId: 't-1', postReasoningTokens: 80, verdict: 'RELEVANT' }] : [],
      targetFiles: withCatm ? [...truth.files, CATM_FILE] : truth.files,
      ...groundTruthToColumns(truth),
      worktreePath: worktree,
      groundTruthError: null,
    });
  }
  const allRows = [...rows, ...extraRows(rows)];
  const samples = await writeParquetArtifact({
    path: path.join(root, 'run', 'environment', 'samples.parquet'),
    schemaName: ENVIRONMENT_SAMPLES_SCHEMA_NAME,
    schemaVersion: ENVIRONMENT_SAMPLES_SCHEMA_VERSION,
    arrowSchema: environmentSamplesArrowSchema,
    rows: allRows,
    inputs: [],
    configHash: hashConfig({ fixture: 'envserver' }),
  });
  return { root, instances, worktrees, truths, rows: allRows, samples, cleanup: () => rmSync(root, { recursive: true, force: true }) };
}

/** A line of a worktree file, 1-based (to write answers that quote real line numbers). */
export function lineOf(worktree: string, file: string, text: string): number {
  const index = readFileSync(path.join(worktree, file), 'utf8').split('\n').findIndex((l) => l.includes(text));
  if (index < 0) throw new Error(`${file} has no line containing ${JSON.stringify(text)}`);
  return index + 1;
}

/** Raw Qwen3 assistant text with reasoning and tool-call blocks, as the trainer sends it. */
export function qwen3ToolCalls(reasoning: string, calls: { name: string; arguments: Record<string, unknown> }[]): string {
  const blocks = calls.map((c) => `<tool_call>\n${JSON.stringify({ name: c.name, arguments: c.arguments })}\n</tool_call>`);
  return `<think>\n${reasoning}\n</think>\n\n${blocks.join('\n')}`;
}
