import { readFile } from 'node:fs/promises';

/** Trainer stderr that no retry can fix: a bad config, data that does not match the checkpoints, no trainer. */
export const PERMANENT_TRAINER_ERRORS = [/ConfigError/, /refusing to resume/, /No module named '?trainer/];

/** The last `chars` characters of a log file ('' when it cannot be read): what explains a failed trainer. */
export async function tailOfFile(file: string, chars = 3000): Promise<string> {
  try {
    const text = await readFile(file, 'utf8');
    return text.slice(-chars);
  } catch {
    return '';
  }
}
