import type { z } from 'zod';

/** The first few schema violations as one line a model (and a reader of the predictions) can act on. */
export function describeIssues(error: z.ZodError, limit = 3): string {
  const issues = error.issues.slice(0, limit).map((issue) => {
    const where =
      issue.path.length > 0
        ? issue.path
            .map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`))
            .join('')
            .replace(/^\./, '')
        : '(root)';
    return `${where}: ${issue.message}`;
  });
  const more = error.issues.length > limit ? ` (and ${error.issues.length - limit} more)` : '';
  return issues.join('; ') + more;
}
