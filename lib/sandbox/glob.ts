import type { GlobArgs, ToolResult } from '../../schemas/tools';
import { defaultEngine, engineExecutables, type SandboxOptions } from './engine';
import { comparePaths, compileGlob, passesGlobs } from './glob-match';
import { SANDBOX_LIMITS } from './limits';
import { LineSplitter } from './line-splitter';
import { fitOutput } from './output';
import { canonicalRoot } from './paths';
import { normalizeGlobPattern } from './glob-pattern';
import { runPipeline, type Stage } from './subprocess';
import { displayPath, errorResult, seconds } from './tool-result';

function listStage(engine: 'rg' | 'grep', executable: string, glob: string): Stage {
  if (engine === 'rg') {
    return {
      executable,
      args: ['--no-config', '--files', '--null', '--hidden', '--no-ignore', `--glob=${glob}`, '--glob=!.git'],
    };
  }
  // find's -P default: symlinks are listed as links (and -type f drops them), never followed.
  return {
    executable,
    args: ['.', '-mindepth', '1', '(', '-name', '.git', '-prune', ')', '-o', '-type', 'f', '-printf', '%P\\0'],
  };
}

/**
 * The glob tool (SPEC §5): lists the repository's files whose path matches a gitignore-style glob, sorted
 * by path, repo-relative, in at most 4096 characters (with a marker saying how many were left out).
 * Symlinks are not listed or followed; `.git` is never listed. Never throws.
 */
export async function glob(root: string, args: GlobArgs, options: SandboxOptions = {}): Promise<ToolResult> {
  try {
    return await globUnsafe(root, args, options);
  } catch (error) {
    return errorResult(`glob failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function globUnsafe(root: string, args: GlobArgs, options: SandboxOptions): Promise<ToolResult> {
  const engine = options.engine ?? defaultEngine();
  const programs = engineExecutables(engine);
  if (!programs.ok) return errorResult(programs.message);
  const canonical = await canonicalRoot(root);
  if (!canonical.ok) return errorResult(canonical.message);
  if (typeof args.pattern !== 'string' || args.pattern.length === 0) return errorResult('glob: pattern must be a non-empty string');
  const normalized = normalizeGlobPattern(args.pattern, root, canonical.root);
  if (!normalized.ok) return errorResult(`glob: ${normalized.message}`);
  const compiled = compileGlob(normalized.pattern);
  if (!compiled.ok) return errorResult(`glob: ${compiled.message}`);

  const limits = SANDBOX_LIMITS;
  const files: string[] = [];
  let listCapped = false;
  const splitter = new LineSplitter(
    limits.maxPathChars,
    (record) => {
      const file = displayPath(record.toString('utf8'));
      if (engine === 'grep' && !passesGlobs([compiled.glob], file)) return 'more';
      files.push(file);
      if (files.length >= limits.globListLimit) {
        listCapped = true;
        return 'enough';
      }
      return 'more';
    },
    0x00,
  );
  const timeoutMs = options.timeoutMs ?? limits.globTimeoutMs;
  const run = await runPipeline([listStage(engine, programs.list, normalized.pattern)], {
    cwd: canonical.root,
    timeoutMs,
    signal: options.signal,
    onStdout: (chunk) => splitter.push(chunk),
  });
  if (!splitter.done) splitter.end();
  const outcome = run.stages[0]!;
  if (outcome.spawnError) return errorResult(`glob could not start ${engine}: ${outcome.spawnError}`);

  files.sort(comparePaths);
  const body = files.join('\n');
  const total = listCapped ? `more than ${limits.globListLimit}` : String(files.length);
  const fitted = fitOutput(body, [], (shownBody) => {
    const count = shownBody ? shownBody.split('\n').length : 0;
    return `[output cut to ${limits.maxOutputChars} characters: ${count} of ${total} matching files shown; use a narrower pattern]`;
  });
  if (run.aborted) return errorResult('glob was cancelled', fitted.output);
  if (run.timedOut) {
    return errorResult(`glob timed out after ${seconds(timeoutMs)} and was stopped; the list above is partial`, fitted.output);
  }
  if (files.length === 0) {
    const exitCode = outcome.exitCode;
    if (exitCode !== 0 && exitCode !== 1) {
      const detail = outcome.stderr.trim().split('\n').slice(0, 4).join('\n');
      return errorResult(`glob failed: ${detail || `exit code ${exitCode}`}`);
    }
    return {
      status: 'ok',
      output: `No files match ${JSON.stringify(args.pattern)} (patterns are relative to the repository root; a pattern without '/' matches at any depth).`,
    };
  }
  if (!fitted.cut && !listCapped) return { status: 'ok', output: fitted.output };
  return { status: 'truncated', output: fitted.output, message: fitted.cutNote ?? `[more than ${limits.globListLimit} files match]` };
}
