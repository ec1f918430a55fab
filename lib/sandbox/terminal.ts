import type { TerminalArgs, ToolResult } from '../../schemas/tools';
import type { SandboxOptions } from './engine';
import { findExecutable } from './executables';
import { SANDBOX_LIMITS } from './limits';
import { fitOutput, sanitizeText } from './output';
import { canonicalRoot } from './paths';
import { describeLimit, runPipeline, toolPlacement, type Stage } from './subprocess';
import { ALLOWED_SUMMARY, isAllowedProgram, prepareProgram } from './terminal-programs';
import { expandGlobWord } from './terminal-expand';
import { tokenize } from './terminal-tokenize';
import { answerWithoutThrowing, errorResult, seconds, slotWaitTimeout } from './tool-result';

function refused(reason: string): ToolResult {
  return errorResult(`terminal: ${reason}\n${ALLOWED_SUMMARY}`);
}

/** Turns the model's command line into validated pipeline stages, or says why not. Runs nothing. */
export async function planCommand(
  root: string,
  command: string,
  deadline = Infinity,
): Promise<{ ok: true; stages: Stage[]; root: string } | { ok: false; message: string }> {
  if (command.length > SANDBOX_LIMITS.maxCommandChars) {
    return { ok: false, message: `the command is longer than ${SANDBOX_LIMITS.maxCommandChars} characters` };
  }
  const canonical = await canonicalRoot(root);
  if (!canonical.ok) return canonical;
  const tokens = tokenize(command);
  if (!tokens.ok) return tokens;
  if (tokens.pipeline.length > SANDBOX_LIMITS.maxPipelineStages) {
    return { ok: false, message: `at most ${SANDBOX_LIMITS.maxPipelineStages} commands per pipeline` };
  }
  const stages: Stage[] = [];
  for (const words of tokens.pipeline) {
    const [programWord, ...argWords] = words;
    const program = programWord!.text;
    if (programWord!.glob !== null || !isAllowedProgram(program)) {
      const hint = program === 'cd' ? ' (commands already run in the repository root)' : '';
      return { ok: false, message: `program ${JSON.stringify(program)} is not allowed${hint}` };
    }
    const args: string[] = [];
    for (const word of argWords) {
      if (word.glob === null) {
        args.push(word.text);
        continue;
      }
      const expanded = await expandGlobWord(canonical.root, root, word.glob, deadline);
      if (expanded === null) args.push(word.text);
      else if (Array.isArray(expanded)) args.push(...expanded);
      else return { ok: false, message: expanded.refused };
    }
    const prepared = await prepareProgram(program, args, { root });
    if (!prepared.ok) return prepared;
    const executable = findExecutable(program);
    if (!executable) return { ok: false, message: `${program} is not installed on this machine` };
    stages.push({ executable, args: prepared.args, program });
  }
  return { ok: true, stages, root: canonical.root };
}

/**
 * The restricted terminal (CodeScout §3.2's bash tool, narrowed per §6.2): a command line of rg, grep,
 * sed -n, cat, head, tail, find, ls and wc joined by '|', parsed by our own tokenizer, every program's flags
 * checked against an allowlist, every path operand through the path guard, then run as a pipeline of
 * argument arrays (no shell) in the worktree root under the global subprocess limit and a 10 s timeout
 * that kills every process group. Shows stdout then stderr, at most 4096 characters. Never throws.
 */
export async function terminal(root: string, args: TerminalArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  return answerWithoutThrowing('terminal', () => terminalUnsafe(root, args, options));
}

async function terminalUnsafe(root: string, args: TerminalArgs, options: SandboxOptions): Promise<ToolResult> {
  if (typeof args.command !== 'string' || args.command.trim() === '') return refused('the command is empty');
  const limits = SANDBOX_LIMITS;
  const timeoutMs = options.timeoutMs ?? limits.terminalTimeoutMs;
  // One deadline for the whole call: glob expansion, the wait for permits and the run itself.
  const deadline = Date.now() + timeoutMs;
  const plan = await planCommand(root, args.command, deadline);
  if (!plan.ok) return refused(plan.message);

  const chunks: Buffer[] = [];
  let stdoutBytes = 0;
  const run = await runPipeline(plan.stages, {
    cwd: plan.root,
    placement: toolPlacement(plan.root, options.isolation),
    timeoutMs: Math.max(1, deadline - Date.now()),
    signal: options.signal,
    ...(options.resourceLimits ? { resourceLimits: options.resourceLimits } : {}),
    onStdout: (chunk) => {
      const room = limits.terminalStdoutBytes - stdoutBytes;
      chunks.push(chunk.subarray(0, Math.max(0, room)));
      stdoutBytes += chunk.length;
      return stdoutBytes > limits.terminalStdoutBytes ? 'enough' : 'more';
    },
  });
  const spawnFailure = run.stages.find((s) => s.spawnError);
  if (spawnFailure) return errorResult(`terminal: could not start the command: ${spawnFailure.spawnError}`);

  // ls -l shows a link's text ("name -> target"), which is the repository's content; what it names
  // outside the worktree does not exist in the sandbox, so nothing is redacted.
  const stdout = sanitizeText(Buffer.concat(chunks).toString('utf8'));
  const stderr = run.stages
    .map((s) => sanitizeText(s.stderr).text.trim())
    .filter(Boolean)
    .join('\n');
  const body = [stdout.text.replace(/\n$/, ''), stderr].filter(Boolean).join('\n');
  const notes: string[] = [];
  if (stdout.binaryCut) notes.push('[binary data: output stopped at the first NUL byte]');
  if (run.stoppedEarly) notes.push(`[output stopped after ${limits.terminalStdoutBytes} bytes; narrow the command]`);
  const lastStage = run.stages[run.stages.length - 1]!;
  if (!run.stoppedEarly && !run.timedOut && !run.aborted && lastStage.exitCode !== 0) {
    notes.push(lastStage.exitCode === null ? `[killed by ${lastStage.signal}]` : `[exit code ${lastStage.exitCode}]`);
  }
  const fitted = fitOutput(body || '(no output)', notes);
  if (run.aborted) return errorResult('terminal: the command was cancelled', fitted.output);
  if (run.timedOut && run.waitedForSlots) return errorResult(`terminal: ${slotWaitTimeout(timeoutMs)}`);
  const limited = run.stages.find((s) => s.limitExceeded);
  if (limited) return errorResult(`terminal: ${describeLimit(limited.limitExceeded!, options.resourceLimits)}`, fitted.output);
  if (run.timedOut) {
    // Only output that exists is called partial: a command killed before printing anything says so.
    const shown = body ? '; the output above is partial' : ' before it printed anything';
    return errorResult(`terminal: the command timed out after ${seconds(timeoutMs)} and was killed${shown}`, fitted.output);
  }
  const cut = fitted.cut || stdout.binaryCut || run.stoppedEarly;
  if (!cut) return { status: 'ok', output: fitted.output };
  return {
    status: 'truncated',
    output: fitted.output,
    message: [fitted.cutNote, ...notes.filter((n) => !n.startsWith('[exit'))].filter(Boolean).join(' '),
  };
}
