import { open } from 'node:fs/promises';

/** Reads the complete lines appended to a file since the last call (a child's stdout written to a file). */
export class LineTail {
  private offset = 0;
  private partial = '';
  private lineNumber = 0;

  constructor(private readonly path: string) {}

  /** New complete lines with their 1-based line numbers; `final` also returns an unterminated last line. */
  async read(final = false): Promise<{ line: number; text: string }[]> {
    let handle;
    try {
      handle = await open(this.path, 'r');
    } catch {
      return [];
    }
    try {
      const chunks: Buffer[] = [];
      for (;;) {
        const buffer = Buffer.alloc(64 * 1024);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        chunks.push(buffer.subarray(0, bytesRead));
      }
      const text = this.partial + Buffer.concat(chunks).toString('utf8');
      const pieces = text.split('\n');
      this.partial = pieces.pop() ?? '';
      if (final && this.partial !== '') {
        pieces.push(this.partial);
        this.partial = '';
      }
      return pieces.map((piece) => ({ line: ++this.lineNumber, text: piece })).filter((l) => l.text.trim() !== '');
    } finally {
      await handle.close();
    }
  }
}
