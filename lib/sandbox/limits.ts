import os from 'node:os';

/**
 * The sandbox's bounds. The first block is CodeGrep App. A.1 ("Layer 3 engineering", swe_grep_tools.py):
 * a global Semaphore(64) over subprocesses, per-tool timeouts of 10 s for grep and glob and 5 s for read,
 * tool outputs cut to 4096 characters, 50 matches per grep and 200 lines per read (docs/design.md "Tools").
 * Everything below the paper block is this project's choice, named so it is never a magic number.
 */
export const PAPER_LIMITS = {
  maxConcurrentSubprocesses: 64,
  grepTimeoutMs: 10_000,
  globTimeoutMs: 10_000,
  readTimeoutMs: 5_000,
  maxOutputChars: 4096,
  maxGrepMatches: 50,
  maxReadLines: 200,
} as const;

/** Project choices (not from the papers). */
export const SANDBOX_LIMITS = {
  ...PAPER_LIMITS,
  /** The restricted terminal (CodeScout §3.2, narrowed) gets grep's budget: its commands are searches. */
  terminalTimeoutMs: PAPER_LIMITS.grepTimeoutMs,
  /** A matching line longer than this is shown cut, so one minified line cannot eat the whole output. */
  maxMatchLineChars: 300,
  /** grep keeps counting matches past the 50 shown, up to this many, to tell the model how many it missed. */
  grepCountLimit: 1000,
  /** glob collects at most this many paths (then sorts them); more than this is reported as "more than N". */
  globListLimit: 100_000,
  /** read reads files in chunks of this size and stops as soon as it has what it needs. */
  readChunkBytes: 64 * 1024,
  /** A file whose first bytes contain a NUL byte is binary (the same rule ripgrep and GNU grep use). */
  binarySniffBytes: 8 * 1024,
  /** The terminal stops reading the last stage's stdout beyond this many bytes (then kills the pipeline). */
  terminalStdoutBytes: 64 * 1024,
  /** Per stage, stderr kept for the observation. */
  stderrBytes: 2 * 1024,
  /** At most this many programs in one terminal pipeline. */
  maxPipelineStages: 5,
  /** Longest command line / argument / path the sandbox accepts. */
  maxCommandChars: 4096,
  maxPathChars: 4096,
  /**
   * Address space of every sandboxed program (prlimit --as). Repetition bombs (`a{32767}{32767}` in GNU
   * grep and find -regex) reach gigabytes in seconds; normal searches of a repository (rg with 4 threads
   * and its per-thread malloc arenas included) run in under 192 MiB. Every stage also weighs this much in
   * the worker-wide memory budget below, so a smaller cap means more programs at once.
   */
  childAddressSpaceBytes: 256 * 1024 * 1024,
  /**
   * The worker-wide memory budget: the address-space caps of all sandboxed programs running at once add up
   * to at most this fraction of the machine's memory (os.totalmem()). Concurrent bombs that each stay
   * under their own cap can then never exhaust a machine without swap together.
   * CODEGREP_SANDBOX_MEMORY_FRACTION overrides it.
   */
  memoryBudgetFraction: 0.5,
  /** CPU seconds of every sandboxed program, all its threads together (prlimit --cpu; SIGXCPU). */
  childCpuSeconds: 10,
  /** Most threads one rg may use (`-j`; also passed by grep/glob): 64 calls × rg's default 12 would be 768. */
  maxSearchThreads: 4,
  /** Largest bound in a regex repetition (`{m,n}`), and the largest product of all bounds in one pattern. */
  maxRepetitionCount: 1000,
  maxRepetitionProduct: 100_000,
  /** Longest regex (grep/rg pattern, find -regex) accepted. */
  maxPatternChars: 1000,
} as const;

/**
 * The worker-wide memory budget in bytes: `fraction` of the machine's memory. The fraction comes from
 * CODEGREP_SANDBOX_MEMORY_FRACTION when set (a number in (0, 1]), else SANDBOX_LIMITS.memoryBudgetFraction.
 */
export function sandboxMemoryBudgetBytes(
  totalBytes: number = os.totalmem(),
  fractionText: string | undefined = process.env.CODEGREP_SANDBOX_MEMORY_FRACTION,
): number {
  const fraction = fractionText === undefined || fractionText === '' ? SANDBOX_LIMITS.memoryBudgetFraction : Number(fractionText);
  if (!(fraction > 0 && fraction <= 1)) {
    throw new Error(`CODEGREP_SANDBOX_MEMORY_FRACTION must be a number in (0, 1], got ${JSON.stringify(fractionText)}`);
  }
  return Math.floor(totalBytes * fraction);
}

/**
 * The downstream agent's file editor (lib/downstream/agents/editor.ts). Project choices: a SWE-bench fix touches a
 * few files of a few KiB (CodeGrep §4.1), so these bounds are far above any honest edit and far below what
 * fills a disk, a patch or a context window.
 */
export const EDITOR_LIMITS = {
  /**
   * Largest file `view` loads, and largest file any write may leave behind (create, str_replace, insert),
   * so the agent can never make a file it cannot view.
   */
  maxFileBytes: 4 * 1024 * 1024,
  /** Longest `old_str` / `new_str` (UTF-8 bytes): a replacement is a focused edit, not a file upload. */
  maxEditStringBytes: 256 * 1024,
  /** Most files one episode may `create` (the count is reserved before the write, so concurrent calls cannot overshoot). */
  maxCreatedFilesPerEpisode: 500,
  /** Longest observation; beyond it the output is clipped with a note on how to see the rest. */
  maxOutputChars: 16_000,
  /** Lines shown above and below an edit. */
  snippetContextLines: 4,
  /** Entries listed by a directory view. */
  maxDirectoryEntries: 400,
  /** Wall-clock limit of one sandboxed write (bwrap + the writing program). */
  writeTimeoutMs: 10_000,
} as const;
export type EditorLimits = { -readonly [K in keyof typeof EDITOR_LIMITS]: number };
