import { stat } from 'node:fs/promises';

/** An input file that cannot be read as asked: missing, a directory, an unknown format, or not what its name says. */
export class InputFileError extends Error {
  override readonly name = 'InputFileError';
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

/** Throws an InputFileError unless `path` names an existing regular file. */
export async function assertReadableFile(path: string): Promise<void> {
  let info;
  try {
    info = await stat(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new InputFileError(path, `Input file ${path} does not exist`);
    throw new InputFileError(path, `Input file ${path} cannot be read: ${(err as Error).message}`);
  }
  if (info.isDirectory()) throw new InputFileError(path, `Input path ${path} is a directory, not a file`);
  if (!info.isFile()) throw new InputFileError(path, `Input path ${path} is not a regular file`);
}
