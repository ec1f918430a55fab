import { findExecutable } from './executables';
import type { SandboxIsolation } from './namespace';

/**
 * Which program backs grep and glob: ripgrep (docs/design.md "Tools") when installed, GNU grep + find otherwise. Injectable
 * so both are tested on every machine that has both.
 */
export type SearchEngine = 'rg' | 'grep';

export interface SandboxOptions {
  /** Defaults to 'rg' when ripgrep is on PATH, else 'grep'. */
  engine?: SearchEngine;
  /** Overrides the tool's timeout (docs/design.md "Tools": 10 s grep/glob/terminal, 5 s read); tests use short ones. */
  timeoutMs?: number;
  /** Cancels the call: running process groups are killed and the result is an error observation. */
  signal?: AbortSignal;
  /** Overrides the per-program memory / CPU limits (lib/sandbox/subprocess.ts); tests use small ones. */
  resourceLimits?: { addressSpaceBytes?: number; cpuSeconds?: number };
  /**
   * `namespace` (default): every tool process runs in the bubblewrap sandbox that holds only the worktree
   * (lib/sandbox/namespace.ts); a machine that cannot create it gets an error observation, never an
   * unisolated run. `filter-only`: the flag allowlists and the path guard alone (the run config's
   * `sandbox.isolation`; the README's Security section says what it gives up).
   */
  isolation?: SandboxIsolation;
}

export function defaultEngine(): SearchEngine {
  return findExecutable('rg') ? 'rg' : 'grep';
}

/** The engine's programs, or a message saying which one is missing. */
export function engineExecutables(engine: SearchEngine): { ok: true; search: string; list: string } | { ok: false; message: string } {
  if (engine === 'rg') {
    const rg = findExecutable('rg');
    return rg ? { ok: true, search: rg, list: rg } : { ok: false, message: 'ripgrep (rg) is not installed on this machine' };
  }
  const grep = findExecutable('grep');
  const find = findExecutable('find');
  if (!grep) return { ok: false, message: 'GNU grep is not installed on this machine' };
  if (!find) return { ok: false, message: 'find is not installed on this machine' };
  return { ok: true, search: grep, list: find };
}
