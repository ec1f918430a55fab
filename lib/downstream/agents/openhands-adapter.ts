import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { DownstreamEndReason, DownstreamInstance } from '../../../schemas/downstream';
import type { DownstreamAgent, DownstreamAgentResult, DownstreamRunContext } from './agent';
import { compileCommand, type CommandTemplate } from '../runs/command-template';
import { findOutputRecord, summarizeOpenHandsOutput, type OpenHandsRunSummary } from './openhands-output';
import { describeExit, runProcess, tail, type ProcessResult } from '../runs/run-process';
import { collectWorkspacePatch } from '../runs/workspace-patch';

/**
 * OpenHands (CodeGrep §4.1's downstream agent) run as an outside command, one instance per call. The
 * command comes from a template (see command-template.ts; split into arguments before substitution, run
 * without a shell) with these placeholders:
 *
 *   {instance_id}    the instance id
 *   {prompt_file}    a file holding the prompt (the issue after injection), UTF-8
 *   {instance_file}  a JSON file holding the instance row, with `problem_statement` replaced by the prompt
 *                    (so OpenHands' own SWE-bench prompt template renders the injected issue)
 *   {workdir}        the fresh writable checkout at the base commit
 *   {output_dir}     an empty directory for OpenHands' output (the run's scratch directory)
 *   {repo}, {base_commit}
 *
 * After the command ends, `<output_dir>/<outputFile>` (default `output.jsonl`; an output.jsonl line or a
 * trajectory JSON with `history` and `metrics`) gives the patch (`test_result.git_patch`), the rounds, the
 * tokens and the trajectory (openhands-output.ts). Without a `git_patch` the patch is the checkout's diff,
 * for setups where OpenHands edits {workdir} in place.
 */
export const OPENHANDS_PLACEHOLDERS = [
  'instance_id',
  'prompt_file',
  'instance_file',
  'workdir',
  'output_dir',
  'repo',
  'base_commit',
] as const;

export interface OpenHandsAdapterOptions {
  command: CommandTemplate;
  /** Wall-clock limit of one run; past it the command's process group is killed (`timeout`). */
  timeoutMs: number;
  /** Output file name inside {output_dir}; may itself use {instance_id}. Default `output.jsonl`. */
  outputFile?: string;
  /** The environment the command inherits (the worker's, read once at start: activities/kit/deps.ts). */
  inheritedEnv: Readonly<Record<string, string | undefined>>;
  /** Added to the inherited environment (e.g. LLM_BASE_URL, LLM_MODEL for OpenHands' config). */
  env?: Record<string, string>;
  /** Working directory of the command (e.g. an OpenHands checkout); default the output directory. */
  cwd?: string;
  name?: string;
}

export function createOpenHandsAdapter(options: OpenHandsAdapterOptions): DownstreamAgent {
  if (!Number.isFinite(options.timeoutMs) || options.timeoutMs <= 0)
    throw new RangeError(`OpenHands adapter: timeoutMs must be positive, got ${options.timeoutMs}`);
  const command = compileCommand(options.command, OPENHANDS_PLACEHOLDERS);
  const outputName = compileCommand([options.outputFile ?? 'output.jsonl'], ['instance_id']);

  return {
    name: options.name ?? 'openhands',
    async run(instance: DownstreamInstance, prompt: string, ctx: DownstreamRunContext): Promise<DownstreamAgentResult> {
      const { outputDir, values } = await writeRunInputs(instance, prompt, ctx);
      const argv = command.render(values);
      const result = await runProcess(argv, {
        cwd: options.cwd ?? outputDir,
        timeoutMs: options.timeoutMs,
        env: { ...options.inheritedEnv, ...options.env },
        ...(ctx.signal ? { signal: ctx.signal } : {}),
      });
      if (result.aborted) throw ctx.signal?.reason ?? new Error('OpenHands run cancelled');

      const outputPath = path.join(outputDir, outputName.render({ instance_id: instance.instance_id })[0]!);
      const { record, readProblem } = await readOutputRecord(outputPath, instance.instance_id);
      const how = `OpenHands ${describeExit(result, options.timeoutMs)}`;
      const stderrTail = tail(result.stderr.trim() || result.stdout.trim(), 2000);
      if (!record) {
        const { patch, dropped } = await collectWorkspacePatch(ctx.workdir, ctx.baseCommit, ctx.signal ? { signal: ctx.signal } : {});
        return {
          patch,
          patchDropped: dropped,
          rounds: 0,
          inputTokens: 0,
          outputTokens: 0,
          trajectory: [],
          endReason: result.timedOut ? 'timeout' : 'agent_error',
          error: `${how}; ${readProblem}${stderrTail ? `\n${stderrTail}` : ''}`,
        };
      }
      return resultFromOutput(record, result, how, stderrTail, ctx);
    },
  };
}

/** The files the command reads (the prompt, the instance with the prompt as its issue) and every placeholder's value. */
async function writeRunInputs(
  instance: DownstreamInstance,
  prompt: string,
  ctx: DownstreamRunContext,
): Promise<{ outputDir: string; values: Record<string, string> }> {
  const outputDir = path.join(ctx.scratch, 'openhands');
  await fs.mkdir(outputDir, { recursive: true });
  const promptFile = path.join(ctx.scratch, 'prompt.txt');
  const instanceFile = path.join(ctx.scratch, 'instance.json');
  await fs.writeFile(promptFile, prompt);
  await fs.writeFile(instanceFile, JSON.stringify({ ...instance, problem_statement: prompt }) + '\n');
  const values: Record<string, string> = {
    instance_id: instance.instance_id,
    prompt_file: promptFile,
    instance_file: instanceFile,
    workdir: ctx.workdir,
    output_dir: outputDir,
    repo: instance.repo,
    base_commit: ctx.baseCommit,
  };
  return { outputDir, values };
}

/** The instance's record in the output file; null with the reason when it is missing, unreadable or another instance's. */
async function readOutputRecord(
  outputPath: string,
  instanceId: string,
): Promise<{ record: Record<string, unknown> | null; readProblem: string | null }> {
  const text = await fs.readFile(outputPath, 'utf8').catch(() => null);
  let record: Record<string, unknown> | null = null;
  let readProblem: string | null = null;
  if (text === null) readProblem = `no output file ${outputPath}`;
  else {
    // A whole JSON document is a trajectory file (or a one-line output.jsonl); anything else is JSONL.
    const whole = parseObject(text);
    if (whole) record = whole;
    else {
      const found = findOutputRecord(text, instanceId);
      record = found.record;
      if (!record)
        readProblem = `output file ${outputPath} has no line for ${instanceId}${found.badLines ? ` (${found.badLines} unreadable line(s))` : ''}`;
    }
  }
  if (record && typeof record.instance_id === 'string' && record.instance_id !== instanceId) {
    readProblem = `output file ${outputPath} is for ${record.instance_id}, not ${instanceId}`;
    record = null;
  }
  return { record, readProblem };
}

/** The run as OpenHands' output tells it; the patch is the checkout's diff when the output has none. */
async function resultFromOutput(
  record: Record<string, unknown>,
  result: ProcessResult,
  how: string,
  stderrTail: string,
  ctx: DownstreamRunContext,
): Promise<DownstreamAgentResult> {
  const summary = summarizeOpenHandsOutput(record);
  const collected =
    summary.gitPatch === null ? await collectWorkspacePatch(ctx.workdir, ctx.baseCommit, ctx.signal ? { signal: ctx.signal } : {}) : null;
  const patch = summary.gitPatch ?? collected!.patch;
  const { endReason, error } = endOfRun(summary, result, how, stderrTail);
  return {
    patch,
    ...(collected ? { patchDropped: collected.dropped } : {}),
    rounds: summary.rounds,
    inputTokens: summary.inputTokens,
    outputTokens: summary.outputTokens,
    trajectory: summary.trajectory,
    endReason,
    ...(error === undefined ? {} : { error }),
  };
}

/** Why the run ended: the process's timeout first, then OpenHands' own error, the exit code, and how it stopped. */
function endOfRun(
  summary: OpenHandsRunSummary,
  result: ProcessResult,
  how: string,
  stderrTail: string,
): { endReason: DownstreamEndReason; error?: string } {
  if (result.timedOut) return { endReason: 'timeout', error: how };
  if (summary.error !== null && /maximum (iteration|budget)|max[_ ]iterations/i.test(summary.error))
    return { endReason: 'round_limit', error: summary.error };
  if (summary.error !== null) return { endReason: 'agent_error', error: summary.error };
  if (result.exitCode !== 0) return { endReason: 'agent_error', error: `${how}${stderrTail ? `\n${stderrTail}` : ''}` };
  if (summary.finished) return { endReason: 'submitted' };
  if (summary.endedWithMessage) return { endReason: 'no_tool_call' };
  return { endReason: 'stopped' };
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
