/**
 * Splits a byte stream into lines without ever holding more than `maxLineBytes` of one line: the rest of an
 * over-long line is counted, not kept. Lets grep, glob and read stream a 1 GB file or a minified one-line
 * bundle in bounded memory.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private keptBytes = 0;
  private droppedBytes = 0;
  private stopped = false;
  /** After push() returned 'enough': where in that chunk the unread bytes start. */
  stoppedAt = 0;

  constructor(
    private readonly maxLineBytes: number,
    /** Receives each line (without its '\n'), cut to maxLineBytes, and the line's full length in bytes. */
    private readonly onLine: (line: Buffer, fullBytes: number) => 'more' | 'enough',
    private readonly separator = 0x0a,
  ) {}

  get done(): boolean {
    return this.stopped;
  }

  /** Lines passed to onLine are only valid during the call (they may view the chunk): decode, don't keep. */
  push(chunk: Buffer): 'more' | 'enough' {
    let start = 0;
    while (!this.stopped && start < chunk.length) {
      const end = chunk.indexOf(this.separator, start);
      if (end !== -1 && this.parts.length === 0 && this.droppedBytes === 0) {
        // The common case: a whole line inside this chunk, passed as a view without copying.
        const length = end - start;
        const line = chunk.subarray(start, start + Math.min(length, this.maxLineBytes));
        start = end + 1;
        if (this.onLine(line, length) === 'enough') {
          this.stopped = true;
          this.stoppedAt = start;
        }
        continue;
      }
      const stop = end === -1 ? chunk.length : end;
      this.keep(chunk.subarray(start, stop));
      if (end === -1) break;
      start = end + 1;
      this.flush();
      if (this.stopped) this.stoppedAt = start;
    }
    return this.stopped ? 'enough' : 'more';
  }

  /** Emits a last line that has no trailing separator. */
  end(): void {
    if (!this.stopped && this.keptBytes + this.droppedBytes > 0) this.flush();
  }

  private keep(piece: Buffer): void {
    const room = this.maxLineBytes - this.keptBytes;
    if (room > 0) {
      const kept = piece.length <= room ? piece : piece.subarray(0, room);
      // Copy: the chunk's buffer is reused by the stream after this call returns.
      this.parts.push(Buffer.from(kept));
      this.keptBytes += kept.length;
      this.droppedBytes += piece.length - kept.length;
    } else {
      this.droppedBytes += piece.length;
    }
  }

  private flush(): void {
    const line = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.keptBytes);
    const full = this.keptBytes + this.droppedBytes;
    this.parts = [];
    this.keptBytes = 0;
    this.droppedBytes = 0;
    if (this.onLine(line, full) === 'enough') this.stopped = true;
  }
}
