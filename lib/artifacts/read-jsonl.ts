import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { RowRecord } from '../../schemas/rows';

const REASON_MAX_CHARS = 120;

/**
 * Streams a JSON Lines file line by line (never the whole file in memory). Blank lines are skipped; a line
 * that is not JSON (a truncated last line included) or is JSON but not an object becomes an error record,
 * so one bad line costs one row, not the file. `ordinal` is the 1-based line number.
 */
export async function* jsonlRowRecords(path: string): AsyncGenerator<RowRecord> {
  const stream = createReadStream(path, { encoding: 'utf8' });
  const lines = createInterface({ input: stream, crlfDelay: Infinity });
  let ordinal = 0;
  try {
    for await (const rawLine of lines) {
      ordinal++;
      const line = ordinal === 1 ? rawLine.replace(/^\uFEFF/, '') : rawLine;
      if (line.trim() === '') continue;
      yield parseLine(line, ordinal);
    }
  } finally {
    lines.close();
    stream.destroy();
  }
}

function parseLine(line: string, ordinal: number): RowRecord {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    return { ordinal, error: `malformed JSON: ${shortReason(err)}` };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return {
      ordinal,
      error: `not a JSON object: the line holds ${value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`}`,
    };
  }
  return { ordinal, row: value };
}

function shortReason(err: unknown): string {
  const message = (err instanceof Error ? err.message : String(err)).replace(/\s*\(line \d+ column \d+\)$/, '');
  return message.length > REASON_MAX_CHARS ? `${message.slice(0, REASON_MAX_CHARS)}…` : message;
}
