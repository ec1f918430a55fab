import { startProcessGroup } from '../../process';

/**
 * Runs one outside program (a test runner, OpenHands, the SWE-bench harness) from an argument array — never
 * a shell — in its own process group (lib/process), so a timeout or an abort kills the program and everything it started
 * (pytest workers, docker clients, shims). Resolves in every case; a program that cannot be started is
 * `spawnError`, not an exception.
 */
export interface ProcessOptions {
  cwd: string;
  timeoutMs: number;
  /** The full environment of the child (callers decide what it inherits). */
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  /** stdout and stderr are each kept up to this many bytes from the END (the tail is what explains a failure). */
  keepBytes?: number;
  /** Written to the child's stdin, then stdin is closed; without it stdin is /dev/null. */
  stdin?: string;
}

export interface ProcessResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Bytes dropped from the start of stdout / stderr to stay within keepBytes. */
  stdoutDropped: number;
  stderrDropped: number;
  timedOut: boolean;
  aborted: boolean;
  /** Set when the program could not be started; `code` is the errno name (ENOENT, EACCES …). */
  spawnError?: { code: string; message: string };
  ms: number;
}

/** Default tail kept per stream: enough for a pytest summary of a few thousand tests. */
export const DEFAULT_KEEP_BYTES = 4 * 1024 * 1024;

class TailBuffer {
  private chunks: Buffer[] = [];
  private bytes = 0;
  dropped = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    while (this.bytes > this.limit && this.chunks.length > 0) {
      const first = this.chunks[0]!;
      const excess = this.bytes - this.limit;
      if (first.length <= excess) {
        this.chunks.shift();
        this.bytes -= first.length;
        this.dropped += first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.bytes -= excess;
        this.dropped += excess;
      }
    }
  }
  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export function runProcess(argv: readonly string[], options: ProcessOptions): Promise<ProcessResult> {
  const started = performance.now();
  const keep = options.keepBytes ?? DEFAULT_KEEP_BYTES;
  const out = new TailBuffer(keep);
  const err = new TailBuffer(keep);
  const [program, ...args] = argv;
  const finish = (partial: Partial<ProcessResult>): ProcessResult => ({
    exitCode: null,
    signal: null,
    stdout: out.text(),
    stderr: err.text(),
    stdoutDropped: out.dropped,
    stderrDropped: err.dropped,
    timedOut: false,
    aborted: false,
    ms: performance.now() - started,
    ...partial,
  });
  if (program === undefined || program === '') {
    return Promise.resolve(finish({ spawnError: { code: 'EINVAL', message: 'empty command: no program to run' } }));
  }
  if (options.signal?.aborted) return Promise.resolve(finish({ aborted: true }));

  let group;
  try {
    group = startProcessGroup(program, args, {
      cwd: options.cwd,
      env: options.env,
      stdin: options.stdin,
      stdout: (chunk) => out.push(chunk),
      stderr: (chunk) => err.push(chunk),
      timeoutMs: options.timeoutMs,
      signal: options.signal,
    });
  } catch (error) {
    return Promise.reject(error); // arguments Node refuses outright (a NUL byte)
  }
  return group.exited.then(({ code, signal, stoppedFor, spawnError }) => {
    if (spawnError) return finish({ spawnError: { code: spawnError.code ?? 'UNKNOWN', message: spawnError.message } });
    return finish({ exitCode: code, signal, timedOut: stoppedFor === 'timeout', aborted: stoppedFor === 'abort' });
  });
}

/** One line saying how a process ended, for logs and error messages. */
export function describeExit(result: ProcessResult, timeoutMs?: number): string {
  if (result.spawnError) return `could not start (${result.spawnError.code}: ${result.spawnError.message})`;
  if (result.timedOut) return `timed out after ${timeoutMs ?? '?'} ms and was killed`;
  if (result.aborted) return 'cancelled';
  if (result.signal) return `killed by ${result.signal}`;
  return `exit code ${result.exitCode}`;
}

/** The last `maxChars` characters of a text, marked when cut. */
export function tail(text: string, maxChars = 4000): string {
  return text.length <= maxChars ? text : `[… ${text.length - maxChars} characters cut]\n${text.slice(-maxChars)}`;
}
