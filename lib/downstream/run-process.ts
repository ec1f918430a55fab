import { spawn } from 'node:child_process';

/**
 * Runs one outside program (a test runner, OpenHands, the SWE-bench harness) from an argument array — never
 * a shell — in its own process group, so a timeout or an abort kills the program and everything it started
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

  return new Promise((resolve) => {
    const child = spawn(program, args, {
      cwd: options.cwd,
      env: options.env,
      shell: false,
      detached: true,
      stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let killedFor: 'timeout' | 'abort' | undefined;
    let settled = false;
    const killGroup = (why: 'timeout' | 'abort') => {
      killedFor ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        try {
          child.kill('SIGKILL');
        } catch {
          // already gone
        }
      }
    };
    const timer = setTimeout(() => killGroup('timeout'), options.timeoutMs);
    const onAbort = () => killGroup('abort');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const settle = (result: ProcessResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(result);
    };
    child.stdout!.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => err.push(chunk));
    if (options.stdin !== undefined && child.stdin) {
      child.stdin.on('error', () => {
        // the program may exit without reading its stdin
      });
      child.stdin.end(options.stdin);
    }
    child.on('error', (error: NodeJS.ErrnoException) => {
      settle(finish({ spawnError: { code: error.code ?? 'UNKNOWN', message: error.message } }));
    });
    child.on('close', (exitCode, signal) => {
      // A killed group leader may leave grandchildren holding the pipes; 'close' waits for them, and the
      // group kill above reached them too.
      settle(finish({ exitCode, signal, timedOut: killedFor === 'timeout', aborted: killedFor === 'abort' }));
    });
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
