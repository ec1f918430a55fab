/** A trainer process exited non-zero on its own; `permanent` when its stderr says no retry can fix it. */
export class TrainerProcessExitError extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
  ) {
    super(message);
  }
}
