import { constants, promises as fs } from 'node:fs';
import { SANDBOX_LIMITS } from './limits';

export type BinarySniff = { binary: false } | { binary: true; reason: string };

/** Files at least this big whose allocated blocks cover under half their size are treated as sparse. */
const SPARSE_MIN_BYTES = 1024 * 1024;

/**
 * Decides, by reading at most `binarySniffBytes`, whether a regular file is binary: a NUL byte in its first
 * bytes (ripgrep's and GNU grep's rule), or a large file that is mostly holes (GNU grep also treats holes as
 * binary). Opened with O_NOFOLLOW|O_NONBLOCK so a symlink swapped in or a FIFO can neither redirect nor block it.
 */
export async function sniffBinary(absolutePath: string): Promise<BinarySniff> {
  const handle = await fs.open(absolutePath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return { binary: true, reason: 'not a regular file' };
    if (stat.size >= SPARSE_MIN_BYTES && stat.blocks * 512 < stat.size / 2) {
      return { binary: true, reason: `sparse file (${stat.size} bytes, mostly holes)` };
    }
    const buffer = Buffer.alloc(Math.min(SANDBOX_LIMITS.binarySniffBytes, stat.size));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    const nul = buffer.subarray(0, bytesRead).indexOf(0);
    return nul === -1 ? { binary: false } : { binary: true, reason: `NUL byte at offset ${nul}` };
  } finally {
    await handle.close();
  }
}
