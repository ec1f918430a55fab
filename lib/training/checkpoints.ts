import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { trainingLayout } from './layout';

/** The newest complete checkpoint (trainer/checkpoint.py: `step-NNNNNNNN/` holding a COMPLETE marker). */
/** The complete checkpoints of a run (`step-N/` holding the trainer's COMPLETE marker), oldest first. */
export function completeCheckpoints(runDir: string): { step: number; path: string }[] {
  const dir = trainingLayout(runDir).checkpoints;
  if (!existsSync(dir)) return [];
  const found: { step: number; path: string }[] = [];
  for (const name of readdirSync(dir)) {
    const match = /^step-(\d+)$/.exec(name);
    if (!match || !existsSync(path.join(dir, name, 'COMPLETE'))) continue;
    found.push({ step: Number(match[1]), path: path.join(dir, name) });
  }
  return found.sort((a, b) => a.step - b.step);
}

/** The newest complete checkpoint: where a retry resumes. */
export function newestCheckpoint(runDir: string): { step: number; path: string } | null {
  return completeCheckpoints(runDir).at(-1) ?? null;
}
