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

function header(buffer: Buffer, type: string, id: number): void {
  buffer.writeUInt32BE(buffer.length - 4, 0);
  buffer.writeUInt8(type.charCodeAt(0), 4);
  buffer.writeUInt32BE(id, 5);
}

/**
 * A start request in one allocation (it is encoded on the worker's loop for every pipeline). Strings are
 * UTF-8; lone surrogates become U+FFFD, as Node's own spawn encodes them.
 */
export function encodeStart(
  id: number,
  request: { argvs: string[][]; cwd: string; env: NodeJS.ProcessEnv; stderrLimitBytes: number },
): Buffer {
  const env: string[] = [];
  for (const key in request.env) {
    const value = request.env[key];
    if (value !== undefined) env.push(`${key}=${value}`);
  }
  const strings = [request.cwd, ...env, ...request.argvs.flat()];
  let size = FRAME_HEADER_BYTES + 4 + 4 + 4 + 4 * request.argvs.length;
  for (const text of strings) size += 4 + Buffer.byteLength(text, 'utf8');
  const buffer = Buffer.allocUnsafe(size);
  header(buffer, 'S', id);
  let at = FRAME_HEADER_BYTES;
  const u32 = (value: number) => (at = buffer.writeUInt32BE(value, at));
  const str = (text: string) => {
    const length = buffer.write(text, at + 4, 'utf8');
    buffer.writeUInt32BE(length, at);
    at += 4 + length;
  };
  u32(request.stderrLimitBytes);
  str(request.cwd);
  u32(env.length);
  env.forEach(str);
  u32(request.argvs.length);
  for (const argv of request.argvs) {
    u32(argv.length);
    argv.forEach(str);
  }
  if (at !== size) throw new Error(`encodeStart: wrote ${at} of ${size} bytes`);
  return buffer;
}

export function encodeKill(id: number): Buffer {
  const buffer = Buffer.alloc(FRAME_HEADER_BYTES);
  header(buffer, 'K', id);
  return buffer;
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
  /** Bytes received but not yet delivered, kept as chunks until the frame they start is complete. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  push(chunk: Buffer, deliver: (message: HelperMessage) => void): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < 4) return;
    let head = this.pending[0]!;
    if (head.length < 4) head = this.joinPending();
    const needed = 4 + head.readUInt32BE(0);
    if (needed < 4 + 5 || needed > 4 + MAX_FRAME_BYTES) throw new Error(`spawner helper sent a frame of ${needed - 4} bytes`);
    if (this.pendingBytes < needed) return; // a big frame still arriving: no copy until it is whole
    let data = this.pending.length === 1 ? head : this.joinPending();
    this.pending = [];
    this.pendingBytes = 0;
    while (data.length >= 4) {
      const length = data.readUInt32BE(0);
      if (length < 5 || length > MAX_FRAME_BYTES) throw new Error(`spawner helper sent a frame of ${length} bytes`);
      if (data.length < 4 + length) break;
      // The body is a view into `data`: a chunk handed on is copied only by a consumer that keeps it.
      deliver(decode(data.readUInt8(4), data.readUInt32BE(5), data.subarray(FRAME_HEADER_BYTES, 4 + length)));
      data = data.subarray(4 + length);
    }
    if (data.length > 0) {
      this.pending = [data];
      this.pendingBytes = data.length;
    }
  }

  private joinPending(): Buffer {
    const joined = Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [joined];
    return joined;
  }
}
