import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Runs test/python/bm25_reference.py (real rank_bm25) in the project venv and returns its JSON answer. */

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const VENV_PYTHON = path.join(REPO_ROOT, '.venv/bin/python');
const SCRIPT = path.join(REPO_ROOT, 'test/python/bm25_reference.py');

export interface ReferenceSpec {
  mode: 'raw' | 'tokens';
  docs: (string | string[])[];
  paths?: (string | string[])[] | null;
  path_weight?: number;
  queries: (string | string[])[];
  k1?: number;
  b?: number;
  epsilon?: number;
  emit_scores?: boolean;
  emit_tokens?: boolean;
  emit_parts?: boolean;
  emit_idf?: boolean;
  top?: number | null;
}

export interface ReferenceResult {
  rankings: number[][];
  scores?: number[][];
  content_scores?: number[][];
  path_scores?: number[][] | null;
  tokens?: { docs: string[][]; paths: string[][] | null; queries: string[][] };
  idf?: Record<string, number>;
  average_idf: number;
  path_average_idf?: number;
  timing: { build_s: number; query_s: number[]; build_cpu_s: number; queries_cpu_s: number };
}

/** Runs one spec. */
export function runBm25Reference(spec: ReferenceSpec): ReferenceResult {
  return runBm25ReferenceBatch([spec])[0]!;
}

/** Runs several specs in one Python process (interpreter and numpy start once). */
export function runBm25ReferenceBatch(specs: ReferenceSpec[]): ReferenceResult[] {
  if (!existsSync(VENV_PYTHON)) {
    throw new Error(
      `the rank_bm25 reference needs the project venv at ${VENV_PYTHON}; run \`npm run setup\` (scripts/setup.sh), which creates .venv with rank_bm25 and numpy`,
    );
  }
  const dir = mkdtempSync(path.join(tmpdir(), 'bm25-reference-'));
  try {
    const input = path.join(dir, 'spec.json');
    writeFileSync(input, JSON.stringify({ batch: specs }));
    const run = spawnSync(VENV_PYTHON, [SCRIPT, input], { encoding: 'utf8', maxBuffer: 1 << 30 });
    if (run.error) throw new Error(`cannot run ${VENV_PYTHON}: ${run.error.message}`);
    if (run.status !== 0) {
      throw new Error(
        `bm25_reference.py exited with ${run.status}: ${run.stderr.trim()}` +
          (run.stderr.includes('No module named') ? ' — run `npm run setup` to install rank_bm25 and numpy into .venv' : ''),
      );
    }
    return (JSON.parse(run.stdout) as { batch: ReferenceResult[] }).batch;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
