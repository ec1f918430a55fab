/**
 * What runPipeline needs from whatever starts its processes: the stages' argument vectors (already wrapped in
 * their limits, and later their namespace), started as a kernel-connected pipeline, each stage its own process
 * group; events per stage; a kill of every group; and a promise for "every process has exited".
 */
export interface PipelineSpec {
  /** One argument vector per stage; element 0 is the absolute path of the program. */
  argvs: string[][];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Per stage, at most this many stderr bytes are delivered. */
  stderrLimitBytes: number;
}

export interface PipelineEvents {
  /** A chunk of the last stage's stdout. */
  onStdout(chunk: Buffer): void;
  onStderr(stage: number, chunk: Buffer): void;
  /** The stage could not be started; the stages after it are not started. */
  onSpawnError(stage: number, message: string): void;
  /** The stage's process was reaped and its pipes closed (Node's 'close'). */
  onExit(stage: number, exitCode: number | null, signal: NodeJS.Signals | null): void;
}

export interface LaunchedPipeline {
  /** SIGKILLs the process group of every stage that has not exited yet; idempotent. */
  kill(): void;
  /** Resolves once every started process has exited and its pipes are closed; never rejects. */
  closed: Promise<void>;
}

export interface PipelineLauncher {
  launch(spec: PipelineSpec, events: PipelineEvents): LaunchedPipeline;
}
