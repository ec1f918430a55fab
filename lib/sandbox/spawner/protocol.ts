import { constants as osConstants } from 'node:os';

/**
 * The framed protocol between the worker and its spawner helper (helper.py's docstring is the reference):
 * u32 length of what follows, u8 type, u32 request id, body; integers big-endian, strings u32 length + UTF-8.
 */
export const FRAME_HEADER_BYTES = 9;
/** The helper refuses longer frames; a start request is a few KiB (the stages' argument vectors). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;

export type HelperMessage =
  | { kind: 'started'; id: number; stage: number; pid: number }
  | { kind: 'spawnError'; id: number; stage: number; message: string }
  | { kind: 'stdout'; id: number; chunk: Buffer }
  | { kind: 'stderr'; id: number; stage: number; chunk: Buffer }
  | { kind: 'exit'; id: number; stage: number; exitCode: number | null; signal: NodeJS.Signals | null }
  | { kind: 'done'; id: number };

function frame(type: string, id: number, body: Buffer): Buffer {
  const header = Buffer.alloc(FRAME_HEADER_BYTES);
  header.writeUInt32BE(5 + body.length, 0);
  header.writeUInt8(type.charCodeAt(0), 4);
  header.writeUInt32BE(id, 5);
  return Buffer.concat([header, body]);
}

function u32(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(value, 0);
  return b;
}

/** A string as UTF-8 (lone surrogates become U+FFFD, as Node's own spawn encodes them). */
function str(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  return [u32(bytes.length), bytes];
}

export function encodeStart(
  id: number,
  request: { argvs: string[][]; cwd: string; env: NodeJS.ProcessEnv; stderrLimitBytes: number },
): Buffer {
  const env = Object.entries(request.env).filter((entry): entry is [string, string] => entry[1] !== undefined);
  const parts: Buffer[] = [u32(request.stderrLimitBytes), ...str(request.cwd), u32(env.length)];
  for (const [key, value] of env) parts.push(...str(`${key}=${value}`));
  parts.push(u32(request.argvs.length));
  for (const argv of request.argvs) {
    parts.push(u32(argv.length));
    for (const arg of argv) parts.push(...str(arg));
  }
  return frame('S', id, Buffer.concat(parts));
}

export function encodeKill(id: number): Buffer {
  return frame('K', id, Buffer.alloc(0));
}

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(
  (Object.entries(osConstants.signals) as Array<[NodeJS.Signals, number]>).map(([name, n]) => [n, name]),
);

function decode(type: number, id: number, body: Buffer): HelperMessage {
  switch (String.fromCharCode(type)) {
    case 'p':
      return { kind: 'started', id, stage: body.readUInt16BE(0), pid: body.readUInt32BE(2) };
    case 'e':
      return { kind: 'spawnError', id, stage: body.readUInt16BE(0), message: body.subarray(2).toString('utf8') };
    case 'o':
      return { kind: 'stdout', id, chunk: body };
    case 'r':
      return { kind: 'stderr', id, stage: body.readUInt16BE(0), chunk: body.subarray(2) };
    case 'x': {
      const code = body.readInt32BE(2);
      const signalNumber = body.readUInt8(6);
      return {
        kind: 'exit',
        id,
        stage: body.readUInt16BE(0),
        exitCode: signalNumber === 0 ? code : null,
        signal: signalNumber === 0 ? null : (SIGNAL_NAMES.get(signalNumber) ?? null),
      };
    }
    case 'd':
      return { kind: 'done', id };
    default:
      throw new Error(`spawner helper sent an unknown frame type ${type}`);
  }
}

/** Reassembles the helper's stdout into messages; `push` throws on a malformed stream. */
export class FrameDecoder {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer, deliver: (message: HelperMessage) => void): void {
    let data = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    while (data.length >= 4) {
      const length = data.readUInt32BE(0);
      if (length < 5 || length > MAX_FRAME_BYTES) throw new Error(`spawner helper sent a frame of ${length} bytes`);
      if (data.length < 4 + length) break;
      // The body is a view into `data`: a chunk handed on is copied only by a consumer that keeps it.
      deliver(decode(data.readUInt8(4), data.readUInt32BE(5), data.subarray(FRAME_HEADER_BYTES, 4 + length)));
      data = data.subarray(4 + length);
    }
    this.pending = data.length ? Buffer.from(data) : Buffer.alloc(0);
  }
}
