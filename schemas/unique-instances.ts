import type { z } from 'zod';

/** A config's `instances` names each instance once: an issue at `instances[i]` for each id listed before. */
export function flagRepeatedInstances(instances: readonly string[], ctx: z.RefinementCtx): void {
  const seen = new Set<string>();
  instances.forEach((id, i) => {
    if (seen.has(id)) ctx.addIssue({ code: 'custom', path: ['instances', i], message: `instance "${id}" is listed twice` });
    seen.add(id);
  });
}
