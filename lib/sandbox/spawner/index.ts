// Where the sandbox's pipelines are started: the spawner helper (default where python3 exists) or the worker.
import { findExecutable } from '../executables';
import { SpawnerHelperClient } from './helper-client';
import { inProcessLauncher } from './in-process';
import type { PipelineLauncher } from './launcher';

export type { LaunchedPipeline, PipelineEvents, PipelineLauncher, PipelineSpec } from './launcher';
export { inProcessLauncher } from './in-process';
export { SpawnerHelperClient, HELPER_SCRIPT } from './helper-client';

export type SpawnPath = 'in-process' | 'helper';

/** The interpreter for the helper: CODEGREP_SPAWNER_PYTHON, else python3 on PATH. */
export function spawnerPython(): string | null {
  return process.env.CODEGREP_SPAWNER_PYTHON || findExecutable('python3');
}

export function spawnerAvailable(): boolean {
  return spawnerPython() !== null;
}

let selected: SpawnPath | undefined;
let helper: SpawnerHelperClient | undefined;

/**
 * Chooses the spawn path for this process (the load benchmark compares both in one run). Without a choice:
 * CODEGREP_SPAWN_PATH (`in-process` | `helper`), else the helper when python3 is installed.
 */
export function selectSpawnPath(path: SpawnPath | undefined): void {
  if (path !== undefined && path !== 'in-process' && path !== 'helper') {
    throw new Error(`unknown spawn path ${JSON.stringify(path)}: expected 'in-process' or 'helper'`);
  }
  selected = path;
}

function defaultSpawnPath(): SpawnPath {
  const fromEnv = process.env.CODEGREP_SPAWN_PATH;
  if (fromEnv === 'in-process' || fromEnv === 'helper') return fromEnv;
  if (fromEnv) throw new Error(`CODEGREP_SPAWN_PATH=${fromEnv}: expected 'in-process' or 'helper'`);
  return spawnerAvailable() ? 'helper' : 'in-process';
}

/** The worker's one spawner helper client (started lazily on its first pipeline). */
export function sharedSpawnerHelper(): SpawnerHelperClient {
  const python = spawnerPython();
  if (!python) throw new Error('the spawner helper needs python3 on PATH (or CODEGREP_SPAWNER_PYTHON)');
  helper ??= new SpawnerHelperClient(python);
  return helper;
}

export function pipelineLauncher(): PipelineLauncher {
  // Where python3 is missing the helper cannot run: the worker spawns (correct, only slower under load).
  return (selected ?? defaultSpawnPath()) === 'helper' && spawnerAvailable() ? sharedSpawnerHelper() : inProcessLauncher;
}
