import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { trainingLayout } from './layout';

/** The newest complete checkpoint (trainer/checkpoint.py: `step-NNNNNNNN/` holding a COMPLETE marker). */
export function newestCheckpoint(runDir: string): { step: number; path: string } | null {
  const dir = trainingLayout(runDir).checkpoints;
  if (!existsSync(dir)) return null;
  let newest: { step: number; path: string } | null = null;
  for (const name of readdirSync(dir)) {
    const match = /^step-(\d+)$/.exec(name);
    if (!match || !existsSync(path.join(dir, name, 'COMPLETE'))) continue;
    const step = Number(match[1]);
    if (!newest || step > newest.step) newest = { step, path: path.join(dir, name) };
  }
  return newest;
}
