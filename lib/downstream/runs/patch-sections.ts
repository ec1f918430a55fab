/**
 * Splits git's patch output, as it streams, into one part per file. A part starts at a line beginning with
 * `diff --git `, which in git's own output can only be a file header: hunk lines start with ' ', '+', '-',
 * '\' or '@', and base85 lines of a binary patch cannot hold a space. Works on bytes, never buffers more
 * than one header line of its own, and so stays linear however long a line or a file is.
 */
const MARKER = Buffer.from('diff --git ');
const NEWLINE = 0x0a;

export interface PatchSectionSink {
  /** A new file's part begins; `path` is the file (relative, as git names it), `header` its first line. */
  start(path: string, header: Buffer): void;
  /** Bytes of the current part (the header line included, passed once through `start` and once here). */
  data(bytes: Buffer): void;
}

export class PatchSections {
  private atLineStart = true;
  private probe = 0;
  private header: Buffer[] | null = null;

  constructor(private readonly sink: PatchSectionSink) {}

  write(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.header) {
        const nl = chunk.indexOf(NEWLINE, i);
        const end = nl === -1 ? chunk.length : nl + 1;
        this.header.push(chunk.subarray(i, end));
        i = end;
        if (nl !== -1) this.finishHeader();
      } else if (this.atLineStart) {
        // Matching the marker's bytes one by one; on a mismatch the matched prefix is ordinary data.
        if (chunk[i] === MARKER[this.probe]) {
          this.probe += 1;
          i += 1;
          if (this.probe === MARKER.length) {
            this.header = [MARKER];
            this.probe = 0;
            this.atLineStart = false;
          }
        } else {
          if (this.probe > 0) this.sink.data(MARKER.subarray(0, this.probe));
          this.probe = 0;
          this.atLineStart = false;
        }
      } else {
        const nl = chunk.indexOf(NEWLINE, i);
        const end = nl === -1 ? chunk.length : nl + 1;
        this.sink.data(chunk.subarray(i, end));
        i = end;
        if (nl !== -1) this.atLineStart = true;
      }
    }
  }

  end(): void {
    if (this.header) this.finishHeader();
    else if (this.probe > 0) this.sink.data(MARKER.subarray(0, this.probe));
    this.probe = 0;
  }

  private finishHeader(): void {
    const header = Buffer.concat(this.header!);
    this.header = null;
    this.atLineStart = true;
    this.sink.start(headerPath(header), header);
    this.sink.data(header);
  }
}

const C_ESCAPES: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };

/** git's C-style quoted name (`"a/t\303\251st"`, core.quotePath) as its UTF-8 text, from after the opening quote. */
function unquote(text: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '"') break;
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const next = text[i + 1] ?? '';
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(text.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(C_ESCAPES[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/**
 * The file a `diff --git a/P b/P` header names. Without renames both sides are the same path, so an unquoted
 * header splits at its middle (quotePath quotes every non-ASCII byte, so characters are bytes here).
 */
export function headerPath(header: Buffer): string {
  const rest = header
    .subarray(MARKER.length)
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (rest.startsWith('"')) return unquote(rest.slice(1)).replace(/^a\//, '');
  const length = (rest.length - 5) / 2;
  return Number.isInteger(length) && length > 0 ? rest.slice(2, 2 + length) : rest.replace(/^a\//, '');
}
