import { createReadStream } from 'node:fs';
import { link, mkdir, open, readdir, readFile, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { contentBytes, isTemporaryName, temporaryName, writeBytesAtomically, writeFileAtomically } from '../atomic-write';
import { ArtifactStoreError, StoreObjectNotFoundError } from './errors';
import { checkKey, fileStoreUri, sortByKey, type ArtifactStore, type StoredObject, type WriteResult } from './store';

/** `file://<dir>`: today's behaviour, objects are files below `dir` written with temp file + rename. */
export function openFileStore(dir: string): ArtifactStore {
  const rootDir = path.resolve(dir);
  const root = fileStoreUri(rootDir);
  const fileOf = (key: string) => path.join(rootDir, ...checkKey(root, key).split('/'));
  return {
    root,
    uriOf: (key) => fileStoreUri(fileOf(key)),
    keyOf: (uri) => keyOfFile(rootDir, uri),
    async ready() {
      await mkdir(rootDir, { recursive: true }).catch((error: unknown) => {
        throw new ArtifactStoreError(root, `artifact store ${root}: cannot create ${rootDir}: ${(error as Error).message}`, {
          cause: error,
        });
      });
    },
    putFile: (key, localPath) => copyAtomically(localPath, fileOf(key)),
    putBytes: (key, content) => writeBytesAtomically(fileOf(key), content),
    getFile: (key, localPath) => getFile(fileOf(key), localPath),
    async getBytes(key) {
      try {
        return await readFile(fileOf(key));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw error;
      }
    },
    async head(key): Promise<StoredObject | null> {
      try {
        const info = await stat(fileOf(key));
        return info.isFile() ? { key, bytes: info.size, sha256: null } : null;
      } catch {
        return null;
      }
    },
    list: (prefix) => listFiles(rootDir, prefix),
    async delete(key) {
      await rm(fileOf(key), { force: true });
    },
    putBytesIfAbsent: (key, content) => createIfAbsent(fileOf(key), content),
    conditionalWrites: () => Promise.resolve('atomic' as const),
  };
}

/** The key of a `file://` URI or a path below `rootDir`, or null when it names something elsewhere. */
function keyOfFile(rootDir: string, uri: string): string | null {
  const file = uri.startsWith('file://') ? new URL(uri).pathname : path.resolve(uri);
  const relative = path.relative(rootDir, decodeURIComponent(file));
  return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? null : relative.split(path.sep).join('/');
}

function copyAtomically(from: string, to: string): Promise<WriteResult> {
  return writeFileAtomically(to, async (write) => {
    for await (const chunk of createReadStream(from)) await write(chunk as Buffer);
  });
}

async function getFile(file: string, localPath: string): Promise<WriteResult> {
  try {
    await stat(file);
  } catch {
    throw new StoreObjectNotFoundError(fileStoreUri(file), `artifact store: ${file} does not exist`);
  }
  return copyAtomically(file, localPath);
}

/** The files below `rootDir` whose key starts with `prefix`, walking only the folders that can hold one. */
async function listFiles(rootDir: string, prefix: string): Promise<StoredObject[]> {
  const out: StoredObject[] = [];
  const walk = async (dir: string, rel: string) => {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const key = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        if (key.startsWith(prefix) || prefix.startsWith(`${key}/`)) await walk(path.join(dir, entry.name), key);
      } else if (entry.isFile() && key.startsWith(prefix) && !isTemporaryName(key)) {
        out.push({ key, bytes: (await stat(path.join(dir, entry.name))).size, sha256: null });
      }
    }
  };
  await walk(rootDir, '');
  return sortByKey(out);
}

/**
 * Creates `file` only if it does not exist. The whole content goes to a temp file first, then link(2) gives it
 * its name: link fails with EEXIST on an existing name, atomically, and a reader never sees a partly written object.
 */
async function createIfAbsent(file: string, content: Uint8Array | string): Promise<boolean> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = temporaryName(file);
  await writeSyncAndClose(await open(tmp, 'wx'), content);
  try {
    await link(tmp, file);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    // A mount without hard links: O_EXCL is still exclusive, though a reader may meet the object half-written.
    if (code === 'EPERM' || code === 'ENOTSUP' || code === 'EOPNOTSUPP' || code === 'ENOSYS') return createExclusively(file, content);
    throw new ArtifactStoreError(fileStoreUri(file), `artifact store: cannot create ${file}: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    await rm(tmp, { force: true });
  }
}

/** Creates `file` with O_EXCL: false when it exists. */
async function createExclusively(file: string, content: Uint8Array | string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  await writeSyncAndClose(handle, content);
  return true;
}

/** Writes the whole content to a newly opened file, syncs and closes it. */
async function writeSyncAndClose(handle: FileHandle, content: Uint8Array | string): Promise<void> {
  try {
    await handle.writeFile(contentBytes(content));
    await handle.sync();
  } finally {
    await handle.close();
  }
}
