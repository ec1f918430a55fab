import { copyFileSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateComponentRepos, type ComponentInstance } from './component-repos';
import { runProgram } from './run-program';
import { writeTaskTokenizer } from './task-tokenizer';

/**
 * How often each component is the broken one. Measured (2026-12-05, bench/learn.ts and trainer/tests/test_learning.py):
 * a tiny random Qwen3-shaped model on two CPU cores learns the episode's protocol (a grep call, then an `<answer>`
 * block) from the teacher's trajectories within the bench's budget, but not the per-issue lookup (copying the
 * path from grep's output, or the component word from the issue): after 200 full fine-tuning steps on 256 such
 * examples its held-out answer-token accuracy stayed at chance (0.08–0.15 of 8). A task where one component breaks
 * more often has a prior it can learn: imitation of the teacher reaches probability matching (Σ p² ≈ 0.56 with
 * these weights), and RL can move it to the reward-maximising answer (≈ 0.74). What the task shows is that the
 * loop (environment, rollout, advantage, update, checkpoint, serving) raises held-out reward, not per-issue search.
 */
export const LEARN_COMPONENT_WEIGHTS = { cache: 20 } as const;

/** The episode limits the task's model is trained and evaluated with: two turns (a grep, an answer). */
export const LEARN_TASK_LIMITS = { maxTurns: 2, maxNewTokens: 96, maxNewTokensPerTurn: 48, maxSeqLen: 4096 } as const;

/**
 * trainer/random_model.py initialises the tied embedding with std 0.02 and the final norm with 1, so every logit
 * of the tiny model is within about ±0.2: its distribution is uniform and LoRA (which leaves the head and the norm
 * frozen) cannot sharpen it (SFT loss stays at ln |V| ≈ 6.9). The final norm scaled by 25 gives logits of
 * std ≈ 4, a random model with a usable output scale (measured with LoRA: SFT loss 10 → 4.3 in 24 steps instead of
 * 6.9 → 6.2 in 48; the bench fine-tunes every weight, as CodeScout §4.1 does, and keeps the scale).
 */
const OUTPUT_NORM_SCALE = 25;

export interface LearnTask {
  dir: string;
  instancesFile: string;
  /** Empty: the task has no agent trajectories to mine, every instance's labels come from its gold patch. */
  trajectoriesFile: string;
  mirrorDir: string;
  /** The tiny random model (its tokenizer trained on the training instances' text). */
  modelDir: string;
  /** The same weights as a `finetune: full` checkpoint at step 0, for the policy server: the untrained start. */
  startCheckpointDir: string;
  training: ComponentInstance[];
  heldOut: ComponentInstance[];
  /** Half the training repositories (a repository's instances share its commit): RFT's; the rest are RL's. */
  rftIds: string[];
  heldOutIds: string[];
}

export interface MakeLearnTaskOptions {
  dir: string;
  /** Offsets the generator's seeds (training repositories: 1 + 2k, held out: 2 + 2k): another draw of the task. */
  seed: number;
  trainRepos: number;
  heldOutRepos: number;
  instancesPerRepo: number;
  python: string;
  /** The project root, where `python -m trainer.…` runs. */
  projectRoot: string;
}

/** Writes the learnable task under `dir`: repositories and their mirrors, instances, tokenizer, model and start. */
export async function makeLearnTask(options: MakeLearnTaskOptions): Promise<LearnTask> {
  const { dir, python, projectRoot } = options;
  mkdirSync(dir, { recursive: true });
  const mirrorDir = path.join(dir, 'mirrors');
  const draw = (seed: number, repos: number) =>
    generateComponentRepos({
      root: dir,
      mirrorDir,
      seed,
      repos,
      instancesPerRepo: options.instancesPerRepo,
      componentWeights: LEARN_COMPONENT_WEIGHTS,
    });
  const training = await draw(1 + 2 * options.seed, options.trainRepos);
  const heldOut = await draw(2 + 2 * options.seed, options.heldOutRepos);
  const instancesFile = path.join(dir, 'instances.jsonl');
  const trajectoriesFile = path.join(dir, 'trajectories.jsonl');
  writeFileSync(instancesFile, [...training, ...heldOut].map((i) => JSON.stringify(i)).join('\n') + '\n');
  writeFileSync(trajectoriesFile, '');

  const modelDir = path.join(dir, 'model');
  const tokenizerDir = path.join(dir, 'tokenizer');
  await writeTaskTokenizer(tokenizerDir, training, LEARN_TASK_LIMITS.maxTurns, python, projectRoot); // held-out text never seen
  await runProgram(python, ['-m', 'trainer.random_model', '--out', modelDir, '--shape', 'tiny', '--tokenizer', tokenizerDir], {
    cwd: projectRoot,
  });
  await scaleOutputNorm(modelDir, OUTPUT_NORM_SCALE, python, projectRoot);
  const startCheckpointDir = path.join(dir, 'start-checkpoint');
  writeStartCheckpoint(modelDir, startCheckpointDir);

  const rftIds = training.filter((i) => Number(/-(\d+)$/.exec(i.repo)![1]) % 2 === 0).map((i) => i.instance_id);
  return {
    dir,
    instancesFile,
    trajectoriesFile,
    mirrorDir,
    modelDir,
    startCheckpointDir,
    training,
    heldOut,
    rftIds,
    heldOutIds: heldOut.map((i) => i.instance_id),
  };
}

async function scaleOutputNorm(modelDir: string, factor: number, python: string, cwd: string): Promise<void> {
  const script = [
    'import glob, sys',
    'from safetensors.torch import load_file, save_file',
    'for f in glob.glob(sys.argv[1] + "/*.safetensors"):',
    '    w = load_file(f)',
    '    if "model.norm.weight" in w:',
    '        w["model.norm.weight"] = w["model.norm.weight"] * float(sys.argv[2])',
    '        save_file(w, f, metadata={"format": "pt"})',
  ].join('\n');
  await runProgram(python, ['-c', script, modelDir, String(factor)], { cwd });
}

/** The random model as a `finetune: full` checkpoint the policy server serves: the start, untrained. */
function writeStartCheckpoint(modelDir: string, out: string): void {
  mkdirSync(out, { recursive: true });
  for (const name of readdirSync(modelDir))
    if (/^(config|generation_config)\.json$|\.safetensors$/.test(name)) copyFileSync(path.join(modelDir, name), path.join(out, name));
  writeFileSync(path.join(out, 'trainer_state.json'), JSON.stringify({ step: 0 }));
  writeFileSync(path.join(out, 'COMPLETE'), 'step 0\n');
}
