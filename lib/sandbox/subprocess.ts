import { SANDBOX_LIMITS } from './limits';
import { findExecutable, sandboxEnv } from './executables';
import { PermitWaitError, subprocessSlots, type Semaphore } from './semaphore';
import {
  decodeNamespaceExit,
  namespaceArgs,
  namespaceSetupFailure,
  probeNamespace,
  sandboxUnavailableMessage,
  type NamespaceView,
  type SandboxIsolation,
} from './namespace';
import { pipelineLauncher, type LaunchedPipeline } from './spawner';

export interface Stage {
  /** Absolute path of the program (see findExecutable). */
  executable: string;
  args: string[];
  /** The program's name as the model wrote it (the terminal's allowlisted programs). */
  program?: string;
}

export interface PipelineOptions {
  cwd: string;
  /** The whole budget, counted from the call: the wait for subprocess slots is part of it. */
  timeoutMs: number;
  /**
   * Once the programs are started they get at least this long, even past `timeoutMs` (whose deadline then
   * bounds only the wait for slots): read's few bytes are never lost to a permit that came late.
   */
  minRunMs?: number;
  /** Called with each chunk of the last stage's stdout; return 'enough' to stop the pipeline early. */
  onStdout: (chunk: Buffer) => 'more' | 'enough';
  signal?: AbortSignal;
  stderrLimitBytes?: number;
  /** The concurrency limit to draw from; defaults to the process-wide one. */
  slots?: Semaphore;
  /** Overrides of the per-program resource limits (tests use small ones to reach them quickly). */
  resourceLimits?: Partial<ResourceLimits>;
  /**
   * Where the programs run. Default: in the bubblewrap namespace (lib/sandbox/namespace.ts) holding only
   * the worktree `cwd` (read-only). `filter-only` runs them on the host, guarded by the allowlists alone.
   */
  placement?: StagePlacement;
}

export type StagePlacement = { isolation: 'namespace'; view: NamespaceView } | { isolation: 'filter-only' };

/** Where a retrieval tool's programs run: the read-only namespace of the worktree `root`, unless filter-only was configured. */
export function toolPlacement(root: string, isolation: SandboxIsolation = 'namespace'): StagePlacement {
  return isolation === 'filter-only' ? { isolation } : { isolation, view: { root, writable: false } };
}

export interface ResourceLimits {
  addressSpaceBytes: number;
  cpuSeconds: number;
}

const DEFAULT_RESOURCE_LIMITS: ResourceLimits = {
  addressSpaceBytes: SANDBOX_LIMITS.childAddressSpaceBytes,
  cpuSeconds: SANDBOX_LIMITS.childCpuSeconds,
};

export interface StageOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  /** Set when the program could not be started (e.g. ENOENT). */
  spawnError?: string;
  /** The program hit its resource limit (address space or CPU time; see limitedStage). */
  limitExceeded?: 'memory' | 'cpu';
}

export interface PipelineOutcome {
  stages: StageOutcome[];
  /** The pipeline ran past timeoutMs and every process group was killed. */
  timedOut: boolean;
  /** onStdout said 'enough' and every process group was killed. */
  stoppedEarly: boolean;
  /** The caller's signal fired and every process group was killed. */
  aborted: boolean;
  /** Milliseconds from the first spawn to the last exit (queueing for a slot not included). */
  elapsedMs: number;
  /** The deadline or abort came while still waiting for subprocess slots: nothing was started. */
  waitedForSlots?: boolean;
}

/**
 * What programs print when an allocation fails (GNU grep, sed, find, coreutils; ripgrep's Rust runtime,
 * whose "memory allocation of N bytes failed" is matched as its two fixed halves). Plain substring tests
 * on stderr: no RegExp runs over a program's output.
 */
const OUT_OF_MEMORY_PHRASES = [
  'memory exhausted',
  'cannot allocate memory',
  "couldn't re-allocate memory",
  'out of memory',
  'regex exceeds size limit',
  'failed to spawn thread',
  'failed to spawn scoped thread',
];

function reportsOutOfMemory(stderr: string): boolean {
  const text = stderr.toLowerCase();
  if (OUT_OF_MEMORY_PHRASES.some((phrase) => text.includes(phrase))) return true;
  const at = text.indexOf('memory allocation of ');
  return at !== -1 && text.includes(' bytes failed', at);
}

/** A stage that ran into its limit, judged from how it ended. */
export function limitHit(outcome: StageOutcome): 'memory' | 'cpu' | undefined {
  if (outcome.signal === 'SIGXCPU') return 'cpu';
  if (outcome.exitCode !== 0 && reportsOutOfMemory(outcome.stderr)) return 'memory';
  return undefined;
}

/** A short sentence for the model about a stage that hit its limit. */
export function describeLimit(kind: 'memory' | 'cpu', overrides: Partial<ResourceLimits> = {}): string {
  const limits = { ...DEFAULT_RESOURCE_LIMITS, ...overrides };
  return kind === 'memory'
    ? `limit exceeded: the program ran out of its ${limits.addressSpaceBytes / 1024 ** 2} MiB memory limit and was stopped; use a simpler pattern or a smaller file`
    : `limit exceeded: the program used its ${limits.cpuSeconds} s of CPU time and was stopped; use a simpler pattern or a narrower path`;
}

/**
 * The stage run under its resource limits: address space (which bounds memory, threads' stacks included),
 * CPU seconds (SIGXCPU at the soft limit, SIGKILL one second later), no core dumps and no file writes
 * (RLIMIT_FSIZE 0: every sandboxed program only writes to pipes). prlimit (util-linux) sets them and execs
 * the program, so the process and its group are the program's; where prlimit is missing, sh's `ulimit`
 * does the same before `exec` (the program and its arguments are passed as "$0" "$@", never parsed).
 */
export function limitedStage(stage: Stage, limits: ResourceLimits = DEFAULT_RESOURCE_LIMITS): Stage {
  const prlimit = findExecutable('prlimit');
  if (prlimit) {
    return {
      executable: prlimit,
      args: [
        `--as=${limits.addressSpaceBytes}`,
        `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
        '--core=0',
        '--fsize=0',
        '--',
        stage.executable,
        ...stage.args,
      ],
    };
  }
  const sh = findExecutable('sh') ?? '/bin/sh';
  const script = `ulimit -v ${Math.floor(limits.addressSpaceBytes / 1024)} && ulimit -t ${limits.cpuSeconds} && ulimit -c 0 && ulimit -f 0 && exec "$0" "$@"`;
  return { executable: sh, args: ['-c', script, stage.executable, ...stage.args] };
}

/** The namespace a pipeline's stages run in (bwrap, the view of the worktree, the working directory); null: on the host. */
type Namespace = { bwrap: string; view: NamespaceView; cwd: string } | null;

/**
 * The command line of one stage: the program under its limits (limitedStage), and, when isolated, that
 * inside the namespace: `bwrap <view> prlimit <limits> -- program args`. prlimit runs inside, so the limits
 * are the program's own; bwrap's own process is not limited (it only waits for the program).
 */
export function stageCommand(stage: Stage, limits: ResourceLimits, namespace: Namespace): Stage {
  const limited = limitedStage(stage, limits);
  if (!namespace) return limited;
  const inside = namespaceArgs(namespace.view, namespace.cwd, [limited.executable, stage.executable]);
  return { executable: namespace.bwrap, args: [...inside, limited.executable, ...limited.args] };
}

/**
 * How a stage ended, as the program itself ended: bwrap's 128 + N read back as signal N, and bwrap's own
 * failure to set the sandbox up reported as a start failure (never as the program's exit code 1).
 */
export function stageEnd(
  code: number | null,
  signal: NodeJS.Signals | null,
  stderr: string,
  isolated: boolean,
): { exitCode: number | null; signal: NodeJS.Signals | null; spawnError?: string } {
  if (!isolated) return { exitCode: code, signal };
  const setupFailure = namespaceSetupFailure(code, stderr);
  return setupFailure ? { exitCode: code, signal, spawnError: setupFailure } : decodeNamespaceExit(code, signal);
}

/** The namespace the stages run in, or why they cannot run at all (isolation asked for and unavailable). */
async function resolvePlacement(
  placement: StagePlacement | undefined,
  cwd: string,
): Promise<{ ok: true; namespace: Namespace } | { ok: false; reason: string }> {
  const chosen = placement ?? { isolation: 'namespace', view: { root: cwd, writable: false } };
  if (chosen.isolation === 'filter-only') return { ok: true, namespace: null };
  const probe = await probeNamespace();
  if (!probe.ok) return { ok: false, reason: sandboxUnavailableMessage(probe.reason) };
  return { ok: true, namespace: { bwrap: probe.bwrap, view: chosen.view, cwd } };
}

/** What a pipeline's run has come to so far: the launcher's callbacks, the timer and the abort share it. */
interface RunState {
  timedOut: boolean;
  stoppedEarly: boolean;
  aborted: boolean;
  /** Kills every process group; does nothing until the stages are launched. */
  killAll: () => void;
}

/**
 * Runs `stages` as a pipeline (stdout of each stage is the next one's stdin, connected by the kernel; the
 * first stage's stdin is /dev/null) with argument arrays and no shell. Holds one permit of the global
 * subprocess limit per stage for the whole run; each stage is its own process group, killed whole on
 * timeout, early stop or abort. Never throws: failures are reported in the outcome.
 */
export async function runPipeline(stages: Stage[], options: PipelineOptions): Promise<PipelineOutcome> {
  const outcomes: StageOutcome[] = stages.map(() => ({ exitCode: null, signal: null, stderr: '' }));
  const empty = (): PipelineOutcome => ({ stages: outcomes, timedOut: false, stoppedEarly: false, aborted: false, elapsedMs: 0 });
  if (stages.length === 0) return empty();
  const badArg = stages.flatMap((s) => [s.executable, ...s.args]).find((a) => a.includes('\0'));
  if (badArg !== undefined) {
    for (const o of outcomes) o.spawnError = 'an argument contains a NUL byte';
    return empty();
  }
  const placement = await resolvePlacement(options.placement, options.cwd);
  if (!placement.ok) {
    for (const o of outcomes) o.spawnError = placement.reason;
    return empty();
  }

  const deadline = Date.now() + options.timeoutMs;
  const permits = await acquirePermits(stages.length, options, deadline);
  if (!permits.ok) {
    return { ...empty(), timedOut: permits.reason === 'timeout', aborted: permits.reason === 'aborted', waitedForSlots: true };
  }
  const started = Date.now();
  const state: RunState = { timedOut: false, stoppedEarly: false, aborted: false, killAll: () => undefined };
  // Resolves once every started process has exited; the permits are released only then.
  let allClosed: Promise<void> = Promise.resolve();

  try {
    if (options.signal?.aborted) {
      state.aborted = true;
      return { ...empty(), aborted: state.aborted };
    }
    const launched = launchStages(stages, options, placement.namespace, outcomes, state);
    state.killAll = launched.kill;
    allClosed = launched.closed;
    await waitForExitOrAbort(allClosed, Math.max(0, deadline - Date.now(), options.minRunMs ?? 0), options.signal, state);
    return {
      stages: outcomes.map((o) => ({ ...o })),
      timedOut: state.timedOut,
      stoppedEarly: state.stoppedEarly && !state.timedOut,
      aborted: state.aborted,
      elapsedMs: Date.now() - started,
    };
  } finally {
    state.killAll();
    void allClosed.then(permits.release);
  }
}

/** One permit of the global subprocess limit per stage, or how the wait for them ended (deadline or abort). */
async function acquirePermits(
  count: number,
  options: PipelineOptions,
  deadline: number,
): Promise<{ ok: true; release: () => void } | { ok: false; reason: PermitWaitError['reason'] }> {
  const slots = options.slots ?? subprocessSlots;
  try {
    // Each stage weighs its address-space cap in the worker-wide memory budget (see Semaphore).
    const stageBytes = options.resourceLimits?.addressSpaceBytes ?? DEFAULT_RESOURCE_LIMITS.addressSpaceBytes;
    const release = await slots.acquire(
      Math.min(count, slots.capacity),
      { deadline, ...(options.signal ? { signal: options.signal } : {}) },
      count * stageBytes,
    );
    return { ok: true, release };
  } catch (error) {
    if (!(error instanceof PermitWaitError)) throw error;
    return { ok: false, reason: error.reason };
  }
}

/**
 * Starts the stages under their limits (and in the namespace, when there is one) and records into
 * `outcomes` how each one ends: its stderr up to the limit, a start failure, its exit, a limit it hit.
 * The last stage's stdout goes to options.onStdout until it says 'enough', which kills every group.
 */
function launchStages(
  stages: Stage[],
  options: PipelineOptions,
  namespace: Namespace,
  outcomes: StageOutcome[],
  state: RunState,
): LaunchedPipeline {
  const stderrLimit = options.stderrLimitBytes ?? SANDBOX_LIMITS.stderrBytes;
  const limits = { ...DEFAULT_RESOURCE_LIMITS, ...options.resourceLimits };
  const argvs = stages.map((s) => {
    const stage = stageCommand(s, limits, namespace);
    return [stage.executable, ...stage.args];
  });
  const stderrBytes = outcomes.map(() => 0);
  // The fork/exec and pipe wiring happen in the spawner (lib/sandbox/spawner): off this event loop.
  return pipelineLauncher().launch(
    { argvs, cwd: options.cwd, env: sandboxEnv(), stderrLimitBytes: stderrLimit },
    {
      onStdout: (chunk) => {
        if (state.stoppedEarly || state.timedOut || state.aborted) return;
        if (options.onStdout(chunk) === 'enough') {
          state.stoppedEarly = true;
          state.killAll();
        }
      },
      onStderr: (stage, chunk) => {
        const outcome = outcomes[stage]!;
        if (stderrBytes[stage]! >= stderrLimit) return;
        const piece = chunk.subarray(0, stderrLimit - stderrBytes[stage]!);
        stderrBytes[stage]! += piece.length;
        outcome.stderr += piece.toString('utf8');
      },
      onSpawnError: (stage, message) => {
        outcomes[stage]!.spawnError = message;
      },
      onExit: (stage, code, signal) => {
        const outcome = outcomes[stage]!;
        const end = stageEnd(code, signal, outcome.stderr, namespace !== null);
        outcome.exitCode = end.exitCode;
        outcome.signal = end.signal;
        if (end.spawnError) outcome.spawnError = end.spawnError;
        const limit = limitHit(outcome);
        if (limit) outcome.limitExceeded = limit;
      },
    },
  );
}

/**
 * Waits until every launched process has exited (`allClosed`), killing them all when `runMs` runs out.
 * An abort answers the caller at once: the groups are SIGKILLed, and their exit (which a loaded machine
 * can take a while to report) is awaited in the background, still holding the permits.
 */
async function waitForExitOrAbort(
  allClosed: Promise<void>,
  runMs: number,
  signal: AbortSignal | undefined,
  state: RunState,
): Promise<void> {
  const timer = setTimeout(() => {
    state.timedOut = true;
    state.killAll();
  }, runMs);
  let answerAbort: () => void = () => undefined;
  const abortAnswered = new Promise<void>((resolve) => (answerAbort = resolve));
  const onAbort = () => {
    state.aborted = true;
    state.killAll();
    answerAbort();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  if (signal?.aborted) onAbort();
  try {
    await Promise.race([allClosed, abortAnswered]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}
