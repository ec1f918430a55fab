import { createHash, randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

export type ByteSink = (chunk: Uint8Array) => Promise<void>;

export type AtomicWriteResult = { sha256: string; bytes: number };

/** The name a write in flight uses before it is renamed (or copied) to `name`: `<name>.tmp-<pid>-<rand>`. */
export function temporaryName(name: string): string {
  return `${name}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
}

/** Whether a name is a write in flight (made by temporaryName), not an object or file yet. */
export function isTemporaryName(name: string): boolean {
  return /\.tmp-\d+-[0-9a-f]+$/.test(name);
}

/** Text as UTF-8 bytes; bytes as they are. */
export function contentBytes(content: Uint8Array | string): Uint8Array {
  return typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
}

/**
 * Writes a file so that readers see either the old content or the complete new content, never a prefix:
 * `produce` writes into `<path>.tmp-<pid>-<rand>` in the same directory, which is fsynced and then renamed
 * over `path`. If `produce` throws, the temp file is removed and `path` is left untouched. The sha256 of the
 * bytes is computed while they are written, so the file is never read back.
 */
export async function writeFileAtomically(path: string, produce: (write: ByteSink) => Promise<void>): Promise<AtomicWriteResult> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  const tmpPath = temporaryName(path);
  const hash = createHash('sha256');
  let bytes = 0;
  const handle = await open(tmpPath, 'wx');
  let renamed = false;
  try {
    try {
      await produce(async (chunk) => {
        let offset = 0;
        while (offset < chunk.byteLength) {
          const { bytesWritten } = await handle.write(chunk, offset, chunk.byteLength - offset);
          offset += bytesWritten;
        }
        hash.update(chunk);
        bytes += chunk.byteLength;
      });
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmpPath, path);
    renamed = true;
    await syncDirectory(dir);
  } finally {
    if (!renamed) await rm(tmpPath, { force: true });
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** Convenience for content already in memory (manifests, small JSON artifacts). */
export function writeBytesAtomically(path: string, content: Uint8Array | string): Promise<AtomicWriteResult> {
  const bytes = contentBytes(content);
  return writeFileAtomically(path, (write) => write(bytes));
}

// The rename is only durable once the directory entry is on disk. Some filesystems refuse to fsync a
// directory; the data file itself is already synced, so that refusal is not an error.
async function syncDirectory(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch {
    // best effort, see above
  } finally {
    await handle?.close();
  }
}
