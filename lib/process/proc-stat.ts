import { readFileSync } from 'node:fs';

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

/** When `pid` started (clock ticks since boot), to tell it from a later process that reuses the pid; null without /proc. */
export function processStartTicks(pid: number): string | null {
  return procStat(pid)?.startTicks ?? null;
}

/** Whether `pid` still runs (a zombie does not) and, given `startTicks`, is still the process that started then. */
export function isProcessAlive(pid: number, startTicks: string | null): boolean {
  const stat = procStat(pid);
  if (stat) return !stat.zombie && (startTicks === null || stat.startTicks === startTicks);
  try {
    process.kill(pid, 0);
    return true; // no /proc: trust the pid
  } catch {
    return false;
  }
}
