import { z } from 'zod';

/**
 * How the agent's tools (grep, glob, read, terminal; lib/sandbox) are isolated. `namespace` (default): every
 * tool process runs in a bubblewrap sandbox holding only the worktree, and a machine that cannot create it
 * refuses to run tools. `filter-only`: the flag allowlists and the path guard alone, for machines without
 * user namespaces; the README's Security section says what it gives up.
 */
export const SandboxIsolationSchema = z.enum(['namespace', 'filter-only'], {
  error: 'sandbox.isolation must be "namespace" (the default: a bubblewrap sandbox per tool process) or "filter-only"',
});

export type SandboxIsolation = z.infer<typeof SandboxIsolationSchema>;

export const SandboxConfigSchema = z.object({
  isolation: SandboxIsolationSchema.default('namespace'),
});
export type SandboxConfig = z.infer<typeof SandboxConfigSchema>;
