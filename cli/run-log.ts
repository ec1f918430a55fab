import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import path from 'node:path';
import { DefaultLogger, Runtime, type LogLevel, type LogMetadata } from '@temporalio/worker';

/** The log file of a `codegrep run`: `<runDir>/logs/codegrep-run.log` (appended to by every run of the run id). */
export function runLogPath(runDir: string): string {
  return path.join(runDir, 'logs', 'codegrep-run.log');
}

let installed: { file: string; stream: WriteStream; closed: boolean; runtime: boolean } | null = null;

/** Opens the run's log file (once per process) and returns its path. */
export function openRunLog(runDir: string): string {
  if (installed) return installed.file;
  const file = runLogPath(runDir);
  mkdirSync(path.dirname(file), { recursive: true });
  installed = { file, stream: createWriteStream(file, { flags: 'a' }), closed: false, runtime: false };
  return file;
}

/**
 * Sends the Temporal SDK's logs (worker, workflow and activity loggers, and the native core's, forwarded)
 * of the in-process workers to the run's log file instead of the terminal, where they flooded the progress
 * bars with task tokens and stack traces. Once per process: the SDK's Runtime is installed once.
 */
export function installRunLogger(runDir: string): string {
  const file = openRunLog(runDir);
  const log = installed!;
  if (log.runtime) return file;
  const write = (entry: { level: LogLevel; message: string; meta?: LogMetadata; timestampNanos: bigint }) => {
    if (log.closed) return; // a late SDK line after the command ended
    const at = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    const meta = entry.meta && Object.keys(entry.meta).length > 0 ? ` ${safeJson(entry.meta)}` : '';
    log.stream.write(`${at} [${entry.level}] ${entry.message}${meta}\n`);
  };
  Runtime.install({
    logger: new DefaultLogger('INFO', write),
    telemetryOptions: { logging: { filter: { core: 'WARN', other: 'WARN' }, forward: {} } },
  });
  log.runtime = true;
  return file;
}

/** Appends a line of the CLI's own to the run log (e.g. a failure's full message). */
export function appendRunLog(line: string): void {
  if (installed && !installed.closed) installed.stream.write(`${new Date().toISOString()} [CLI] ${line}\n`);
}

/** Flushes and closes the log file (at the end of the command). */
export async function closeRunLog(): Promise<void> {
  const current = installed;
  if (!current || current.closed) return;
  current.closed = true;
  await new Promise<void>((resolve) => current.stream.end(resolve));
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_key, v: unknown) =>
      typeof v === 'bigint' ? v.toString() : v instanceof Error ? { message: v.message, stack: v.stack } : v,
    );
  } catch {
    return String(value);
  }
}
