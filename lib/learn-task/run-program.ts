import { startProcessGroup } from '../process';

/**
 * Runs a program to completion through lib/process (its own process group, reaped); resolves with its stdout,
 * rejects naming the command and the end of its stderr when it fails. For the task generator's short git and
 * Python steps.
 */
export async function runProgram(
  program: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<string> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const group = startProcessGroup(program, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    stdout: (chunk) => out.push(chunk),
    stderr: (chunk) => err.push(chunk),
    timeoutMs: options.timeoutMs ?? 300_000,
  });
  const exit = await group.exited;
  if (exit.spawnError) throw new Error(`could not start ${program}: ${exit.spawnError.message}`);
  if (exit.code !== 0) {
    const stderr = Buffer.concat(err).toString('utf8').trim().split('\n').slice(-5).join('\n');
    const how = exit.stoppedFor ? `stopped (${exit.stoppedFor})` : `exited ${exit.code ?? exit.signal}`;
    throw new Error(`${program} ${args.slice(0, 3).join(' ')} … ${how}${stderr ? `:\n${stderr}` : ''}`);
  }
  return Buffer.concat(out).toString('utf8');
}
