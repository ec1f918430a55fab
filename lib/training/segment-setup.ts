import { writeFile } from 'node:fs/promises';
import {
  createTrainingEnvironment,
  loadEnvSamples,
  startEnvServer,
  type EnvServer,
  type LoadEnvSamplesOptions,
  type LoadedEnvSamples,
  type TrainingEnvironment,
} from '../envserver';
import type { ResolvedTrainingConfig } from '../../schemas/training/config';
import { holdWorktrees, type WorktreeHold } from '../worktrees/holds';
import { attemptFiles, nextAttemptNumber, segmentDir, trainingLayout } from './layout';
import { environmentLimits, trainerConfig } from './trainer-config';

/** The samples file holds no sample the recipe can train on (the input is wrong: no retry helps). */
export class NoTrainableSamplesError extends Error {
  override readonly name = 'NoTrainableSamplesError';
}

export interface SegmentSetup {
  loaded: LoadedEnvSamples;
  environment: TrainingEnvironment;
  /** Serving `environment` on loopback; the caller closes it once the trainer exited. */
  server: EnvServer;
  /**
   * The samples' worktrees, held while the segment runs so that a disk budget (`environment.maxWorktreeBytes`,
   * lib/worktrees/budget.ts) never prunes one under an episode; the caller releases it with the server.
   */
  hold: WorktreeHold;
  /** This attempt's number in the segment folder and its files (config, stdout, stderr). */
  attempt: number;
  files: ReturnType<typeof attemptFiles>;
}

/** Everything a segment attempt needs before its trainer starts: the samples, their environment server, the trainer's config file. */
export async function setUpSegment(
  input: {
    runDir: string;
    segment: number;
    totalSteps: number;
    samplesUri: string;
    training: ResolvedTrainingConfig;
    /** Where each sample's worktree is on this node, when it is not the path the samples name (README "Deployment: several machines"). */
    worktreePath?: LoadEnvSamplesOptions['worktreePath'];
    storeSettings?: LoadEnvSamplesOptions['storeSettings'];
  },
  onServerError: (error: unknown, route: string) => void,
): Promise<SegmentSetup> {
  const t = input.training;
  const loaded = await loadEnvSamples(input.samplesUri, t.recipe, {
    ...(input.worktreePath ? { worktreePath: input.worktreePath } : {}),
    ...(input.storeSettings ? { storeSettings: input.storeSettings } : {}),
  });
  if (loaded.instanceIds.length === 0) {
    const first =
      loaded.skipped
        .slice(0, 3)
        .map((s) => `${s.instanceId}: ${s.reason}`)
        .join('; ') || 'the file is empty';
    throw new NoTrainableSamplesError(`no trainable sample in ${input.samplesUri} (${loaded.skipped.length} skipped; first: ${first})`);
  }
  const hold = await holdWorktrees([...loaded.samples.values()].map((sample) => sample.worktree));
  let server: EnvServer | null = null;
  try {
    const environment = createTrainingEnvironment({
      samples: loaded.samples,
      recipe: t.recipe,
      limits: environmentLimits(t),
      codescoutTurnBonus: t.codescoutTurnBonus,
      sandbox: { isolation: t.sandbox.isolation },
    });
    server = await startEnvServer(environment, { onInternalError: onServerError });
    const dir = segmentDir(input.runDir, input.segment);
    const attempt = nextAttemptNumber(dir);
    const files = attemptFiles(dir, attempt);
    const outputDir = trainingLayout(input.runDir).trainerOutput;
    const config = trainerConfig(t, { outputDir, envUrl: server.url, instanceIds: loaded.instanceIds, totalSteps: input.totalSteps });
    await writeFile(files.config, JSON.stringify(config, null, 2) + '\n');
    return { loaded, environment, server, hold, attempt, files };
  } catch (error) {
    await server?.close().catch(() => undefined);
    await hold.release();
    throw error;
  }
}
