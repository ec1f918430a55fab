import { spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { open, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';

/**
 * The trainer as a child process of the training activity. It runs in a process group of its own
 * (`detached`), so a stop reaches every process it started (data loaders, vLLM workers), and it writes its
 * stdout and stderr to files, never to pipes: a worker killed with SIGKILL then leaves a trainer that still
 * records every line (a broken pipe would crash it between a checkpoint and its step line) until the next
 * attempt reaps it through the pid file.
 */

export interface TrainerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface TrainerProcess {
  pid: number;
  exited: Promise<TrainerExit>;
  /** Signals the trainer's whole process group; false when it is already gone. */
  signal(signal: NodeJS.Signals): boolean;
}

export interface SpawnTrainerOptions {
  python: string;
  args: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdoutPath: string;
  stderrPath: string;
}

export function signalGroup(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    try {
      process.kill(pid, signal);
      return true;
    } catch {
      return false;
    }
  }
}

export function spawnTrainer(options: SpawnTrainerOptions): Promise<TrainerProcess> {
  const stdout = openSync(options.stdoutPath, 'a');
  const stderr = openSync(options.stderrPath, 'a');
  return new Promise((resolve, reject) => {
    const child = spawn(options.python, options.args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['ignore', stdout, stderr],
    });
    const exited = new Promise<TrainerExit>((done) => child.once('exit', (code, signal) => done({ code, signal })));
    child.once('error', (error) => {
      closeSync(stdout);
      closeSync(stderr);
      reject(error);
    });
    child.once('spawn', () => {
      // The child holds its own copies of the descriptors.
      closeSync(stdout);
      closeSync(stderr);
      resolve({ pid: child.pid!, exited, signal: (signal) => signalGroup(child.pid!, signal) });
    });
  });
}

/** Process start time in clock ticks since boot (/proc/<pid>/stat field 22), and whether it is a zombie. */
function procStat(pid: number): { startTicks: string; zombie: boolean } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: split after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { startTicks: fields[19]!, zombie: fields[0] === 'Z' || fields[0] === 'X' };
  } catch {
    return null;
  }
}

export interface TrainerPidRecord {
  pid: number;
  /** Guards against pid reuse: the process must have started at this tick to be ours. */
  startTicks: string | null;
  host: string;
  segment: number;
  attempt: number;
  startedAt: string;
}

export async function writePidFile(file: string, pid: number, where: { segment: number; attempt: number }): Promise<void> {
  const record: TrainerPidRecord = {
    pid,
    startTicks: procStat(pid)?.startTicks ?? null,
    host: os.hostname(),
    ...where,
    startedAt: new Date().toISOString(),
  };
  await writeFile(file, JSON.stringify(record, null, 2) + '\n');
}

export async function removePidFile(file: string): Promise<void> {
  await rm(file, { force: true });
}

/** Whether the process of a pid record still runs (a zombie does not). */
export function isRecordAlive(record: TrainerPidRecord): boolean {
  const stat = procStat(record.pid);
  if (stat) return !stat.zombie && (record.startTicks === null || stat.startTicks === record.startTicks);
  try {
    process.kill(record.pid, 0);
    return true; // no /proc: trust the pid
  } catch {
    return false;
  }
}

async function waitUntil(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
  return true;
}

/**
 * Stops a trainer an earlier attempt left running (its worker was killed): SIGTERM to its group, so it
 * checkpoints at its next safe point, then SIGKILL after `graceMs`. Returns what it found and did. A record
 * from another host is left alone: its process cannot be seen from here.
 */
export async function reapStaleTrainer(file: string, graceMs: number): Promise<{ found: TrainerPidRecord | null; action: 'none' | 'gone' | 'other-host' | 'terminated' | 'killed' }> {
  let record: TrainerPidRecord;
  try {
    record = JSON.parse(await readFile(file, 'utf8')) as TrainerPidRecord;
  } catch {
    return { found: null, action: 'none' };
  }
  if (record.host !== os.hostname()) return { found: record, action: 'other-host' };
  if (!isRecordAlive(record)) {
    await removePidFile(file);
    return { found: record, action: 'gone' };
  }
  signalGroup(record.pid, 'SIGTERM');
  if (await waitUntil(() => !isRecordAlive(record), graceMs)) {
    await removePidFile(file);
    return { found: record, action: 'terminated' };
  }
  signalGroup(record.pid, 'SIGKILL');
  await waitUntil(() => !isRecordAlive(record), 30_000);
  await removePidFile(file);
  return { found: record, action: 'killed' };
}

/** Reads the complete lines appended to a file since the last call (the trainer's stdout). */
export class LineTail {
  private offset = 0;
  private partial = '';
  private lineNumber = 0;

  constructor(private readonly path: string) {}

  /** New complete lines with their 1-based line numbers; `final` also returns an unterminated last line. */
  async read(final = false): Promise<{ line: number; text: string }[]> {
    let handle;
    try {
      handle = await open(this.path, 'r');
    } catch {
      return [];
    }
    try {
      const chunks: Buffer[] = [];
      for (;;) {
        const buffer = Buffer.alloc(64 * 1024);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        chunks.push(buffer.subarray(0, bytesRead));
      }
      const text = this.partial + Buffer.concat(chunks).toString('utf8');
      const pieces = text.split('\n');
      this.partial = pieces.pop() ?? '';
      if (final && this.partial !== '') {
        pieces.push(this.partial);
        this.partial = '';
      }
      return pieces.map((piece) => ({ line: ++this.lineNumber, text: piece })).filter((l) => l.text.trim() !== '');
    } finally {
      await handle.close();
    }
  }
}
