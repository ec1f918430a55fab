/**
 * `codegrep training checkpoints <runId> [--data-dir runs]`: the run's complete checkpoints, each with its
 * adapter's sha256 and, where the run validates (training.validation), its validation figures; the one
 * `checkpoint: best` serves is marked.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { sha256File } from '../lib/artifacts';
import { checkpointWeightsFile } from '../lib/policy-server';
import { RUN_ARTIFACTS } from '../lib/paths/run-artifacts';
import { completeCheckpoints } from '../lib/training/checkpoints';
import { readValidationRecords } from '../lib/training/validation';
import { bestValidatedStep } from '../lib/training/validation-choice';
import { ConfigError } from '../schemas/config';

export async function checkpointLines(runId: string, runDir: string): Promise<string[]> {
  const checkpoints = completeCheckpoints(runDir);
  const validations = await readValidationRecords(runDir);
  const best = bestValidatedStep(validations);
  const lines = [`${runId}: ${checkpoints.length} complete checkpoint(s) in ${path.join(runDir, RUN_ARTIFACTS.trainingCheckpoints)}`];
  if (checkpoints.length === 0 && validations.length === 0) return lines;
  const header = ['step', 'adapter sha256', 'validation', 'instances', 'served as'];
  const rows: string[][] = [];
  const steps = [...new Set([...checkpoints.map((c) => c.step), ...validations.map((v) => v.step)])].sort((a, b) => a - b);
  for (const step of steps) {
    const checkpoint = checkpoints.find((c) => c.step === step);
    const weights = checkpoint ? checkpointWeightsFile(checkpoint.path) : null;
    const sha = weights ? (await sha256File(weights)).slice(0, 16) : 'pruned';
    const v = validations.find((r) => r.step === step);
    rows.push([
      `${step}${step === best ? ' (best)' : ''}`,
      sha,
      v ? `${v.metric} ${v.value === null ? '–' : v.value.toFixed(4)}` : '–',
      v ? `${v.instances}${v.failed ? ` (${v.failed} failed)` : ''}` : '–',
      `${runId}/step-${String(step).padStart(8, '0')}`,
    ]);
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const format = (cells: string[]) => `  ${cells.map((c, i) => c.padEnd(widths[i]!)).join('  ')}`.trimEnd();
  lines.push(format(header), ...rows.map(format));
  if (validations.length === 0) lines.push('  no validation records (set training.validation to validate checkpoints as the run trains)');
  return lines;
}

export async function trainingCheckpointsCommand(runId: string | undefined, dataDir: string): Promise<number> {
  if (!runId)
    throw new ConfigError('codegrep training checkpoints needs a run id: codegrep training checkpoints <runId> [--data-dir runs]');
  const runDir = path.join(path.resolve(dataDir), runId);
  if (!existsSync(runDir)) throw new ConfigError(`no run ${runId} in ${path.resolve(dataDir)} (pass --data-dir where its runs are)`);
  for (const line of await checkpointLines(runId, runDir)) console.log(line);
  return 0;
}
