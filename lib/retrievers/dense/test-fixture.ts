import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { repoRoot } from '../../../test/support/repo-root';

/**
 * For the dense retriever's tests and bench: a real ONNX embedding model, made by
 * test/python/make_tiny_embedding_model.py (a random BertModel exported with torch.onnx.export, a WordPiece
 * tokenizer.json, sentence-transformers configs) in the project venv. Made once per version of the script
 * and kept under os.tmpdir(), so no binary is committed and later runs start at once. Concurrent test
 * processes wait for the one that is making it.
 */

export const MAKE_MODEL_SCRIPT = path.join(repoRoot, 'test/python/make_tiny_embedding_model.py');
export const VENV_PYTHON = path.join(repoRoot, '.venv/bin/python');

export type FixtureModelSize = 'tiny' | 'minilm';

export interface ReferenceText {
  text: string;
  input_ids: number[];
  mean_normalized: number[];
  cls: number[];
}

export interface FixtureModel {
  /** The sentence-transformers-style model folder (mean pooling + Normalize). Never modify it: copy it. */
  modelDir: string;
  /** What transformers + tokenizers compute for a few texts with the same files. */
  reference: { size: FixtureModelSize; max_seq_length: number; texts: ReferenceText[] };
}

const LOCK_STALE_MS = 15 * 60_000;

function runScript(outDir: string, size: FixtureModelSize): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(VENV_PYTHON, [MAKE_MODEL_SCRIPT, outDir, '--size', size], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.on('error', (error) => reject(new Error(`cannot run ${VENV_PYTHON}: ${error.message}; run \`bash scripts/setup.sh\``)));
    child.on('close', (code) => {
      if (code === 0) resolve();
      else {
        reject(
          new Error(
            `${path.relative(repoRoot, MAKE_MODEL_SCRIPT)} failed (exit ${code}); it needs torch, transformers, tokenizers and onnx ` +
              `in ${VENV_PYTHON}: run \`bash scripts/setup.sh\`.\n${output.slice(-4000)}`,
          ),
        );
      }
    });
  });
}

async function sleep(ms: number): Promise<void> {
  await new Promise((r) => setTimeout(r, ms));
}

/** The fixture model of `size`, made now if this version of the script has not made it before. */
export async function fixtureModel(size: FixtureModelSize = 'tiny'): Promise<FixtureModel> {
  if (!existsSync(VENV_PYTHON)) {
    throw new Error(`the dense retriever's test model is made with the project venv, and ${VENV_PYTHON} is missing: run \`bash scripts/setup.sh\``);
  }
  const scriptHash = createHash('sha256').update(readFileSync(MAKE_MODEL_SCRIPT)).digest('hex').slice(0, 16);
  const target = path.join(os.tmpdir(), `codegrep-dense-model-${size}-${scriptHash}`);
  const load = async (): Promise<FixtureModel> => ({
    modelDir: path.join(target, 'model'),
    reference: JSON.parse(await readFile(path.join(target, 'reference.json'), 'utf8')) as FixtureModel['reference'],
  });
  if (existsSync(path.join(target, 'reference.json'))) return load();

  const lock = `${target}.lock`;
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch {
      if (existsSync(path.join(target, 'reference.json'))) return load();
      const age = await stat(lock).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (age > LOCK_STALE_MS) await rmdir(lock).catch(() => undefined);
      else await sleep(500);
    }
  }
  try {
    if (!existsSync(path.join(target, 'reference.json'))) {
      const work = await mkdtemp(path.join(os.tmpdir(), `codegrep-dense-model-${size}-making-`));
      try {
        await runScript(work, size);
        await rm(target, { recursive: true, force: true });
        await rename(work, target);
      } catch (error) {
        await rm(work, { recursive: true, force: true });
        throw error;
      }
    }
  } finally {
    await rmdir(lock).catch(() => undefined);
  }
  return load();
}

/** A writable copy of the fixture's model folder, with `edit` applied (for config variants). */
export async function copyModelFolder(
  modelDir: string,
  into: string,
  edit: (dir: string) => Promise<void> = async () => undefined,
): Promise<string> {
  const dir = path.join(into, `model-${Math.random().toString(36).slice(2, 10)}`);
  await cp(modelDir, dir, { recursive: true });
  await edit(dir);
  return dir;
}

/** Writes `value` as pretty JSON to dir/relative. */
export async function writeJson(dir: string, relative: string, value: unknown): Promise<void> {
  await mkdir(path.dirname(path.join(dir, relative)), { recursive: true });
  await writeFile(path.join(dir, relative), `${JSON.stringify(value, null, 2)}\n`);
}
