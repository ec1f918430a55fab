/**
 * `npm run bench -- train`: the trainer's throughput on the tiny random Qwen3 on CPU (bench/gpu-train.sh
 * --cpu-dry-run → trainer/bench_train.py), one JSON line: rollout tokens/s against a plain batched generate of
 * the same prompts in the same run, the environment server's share of the step, update tokens/s and MFU against
 * the fp32 matmul rate measured in the same run, peak memory and the step split. On a GPU node run
 * `bash bench/gpu-train.sh` (0.6B and 4B shapes) instead.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const code = await new Promise<number>((resolve) => {
  const child = spawn('bash', [path.join(root, 'bench', 'gpu-train.sh'), '--cpu-dry-run'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  child.once('exit', (exitCode) => {
    if (exitCode !== 0) process.stderr.write(stderr);
    resolve(exitCode ?? 1);
  });
});
process.exit(code);
