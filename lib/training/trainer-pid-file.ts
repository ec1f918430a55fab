import { readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { isProcessAlive, processStartTicks, signalProcessGroup } from '../process';

/**
 * The running trainer, recorded in `training/trainer.pid.json`. The trainer writes its output to files, never to
 * pipes, so a worker killed with SIGKILL leaves a trainer that still records every line (a broken pipe would
 * crash it between a checkpoint and its step line) until the next attempt reaps it through this record.
 */

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
    startTicks: processStartTicks(pid),
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
  return isProcessAlive(record.pid, record.startTicks);
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
export async function reapStaleTrainer(
  file: string,
  graceMs: number,
): Promise<{ found: TrainerPidRecord | null; action: 'none' | 'gone' | 'other-host' | 'terminated' | 'killed' }> {
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
  signalProcessGroup(record.pid, 'SIGTERM');
  if (await waitUntil(() => !isRecordAlive(record), graceMs)) {
    await removePidFile(file);
    return { found: record, action: 'terminated' };
  }
  signalProcessGroup(record.pid, 'SIGKILL');
  await waitUntil(() => !isRecordAlive(record), 30_000);
  await removePidFile(file);
  return { found: record, action: 'killed' };
}
