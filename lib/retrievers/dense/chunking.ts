/**
 * Long files are cut into overlapping windows of tokens, each embedded on its own; a file's score is the
 * maximum cosine over its chunks (see retrieve.ts). A window holds at most `window` content tokens (the
 * model's maximum sequence length minus its special tokens and the document prompt); consecutive windows
 * share `overlap` tokens. The last window ends at the last token, so no token is dropped; a file with no
 * tokens (empty, or whitespace only) is one empty chunk, embedded like sentence-transformers embeds "".
 */

export interface TokenSpan {
  /** Token offsets into the file's token ids, end exclusive. */
  start: number;
  end: number;
}

export function chunkSpans(tokenCount: number, window: number, overlap: number): TokenSpan[] {
  if (!Number.isInteger(tokenCount) || tokenCount < 0)
    throw new RangeError(`chunkSpans: tokenCount must be an integer >= 0, got ${tokenCount}`);
  if (!Number.isInteger(window) || window < 1) throw new RangeError(`chunkSpans: window must be an integer >= 1, got ${window}`);
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= window) {
    throw new RangeError(`chunkSpans: overlap must be an integer in [0, window) = [0, ${window}), got ${overlap}`);
  }
  if (tokenCount <= window) return [{ start: 0, end: tokenCount }];
  const stride = window - overlap;
  const spans: TokenSpan[] = [];
  for (let start = 0; ; start += stride) {
    const end = Math.min(start + window, tokenCount);
    spans.push({ start, end });
    if (end === tokenCount) return spans;
  }
}
