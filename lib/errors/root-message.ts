/**
 * The innermost message of an error's `cause` chain: what a user needs to read (an activity's own words,
 * not the ActivityFailure / ChildWorkflowFailure wrappers around it). Pure: workflows use it too.
 */
export function rootMessage(error: unknown): string {
  let current: unknown = error;
  let message = error instanceof Error ? error.message : String(error);
  while (current instanceof Error) {
    message = current.message || message;
    current = (current as Error & { cause?: unknown }).cause;
  }
  return message;
}
