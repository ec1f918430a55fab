import { readFileSync } from 'node:fs';

/** Process state (/proc/<pid>/stat field 3), start time in clock ticks since boot (field 22). */
function procStat(pid: number): { state: string; startTicks: string; zombie: boolean } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: split after its closing one.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0]!, startTicks: fields[19]!, zombie: fields[0] === 'Z' || fields[0] === 'X' };
  } catch {
    return null;
  }
}

/** When `pid` started (clock ticks since boot), to tell it from a later process that reuses the pid; null without /proc. */
export function processStartTicks(pid: number): string | null {
  return procStat(pid)?.startTicks ?? null;
}

/** The state letter of `pid` (R, S, D, Z, T …, see proc(5)); null when it is gone or there is no /proc. */
export function processState(pid: number): string | null {
  return procStat(pid)?.state ?? null;
}

/** What a state letter of proc(5) means, for messages a user reads. */
export function describeProcessState(state: string | null): string {
  switch (state) {
    case null:
      return 'state unknown (no /proc entry)';
    case 'D':
      // The one state SIGKILL cannot end: the process waits in the kernel and takes the signal only when that call returns.
      return 'state D: uninterruptible sleep, stuck in a kernel call (a GPU driver, NCCL or network file system call); only the call returning or a reboot ends it';
    case 'Z':
      return 'state Z: a zombie nobody reaped';
    case 'T':
    case 't':
      return `state ${state}: stopped or traced`;
    case 'R':
      return 'state R: running';
    case 'S':
      return 'state S: sleeping';
    default:
      return `state ${state}`;
  }
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
