import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, mkdir, open, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeBytesAtomically, writeFileAtomically } from '../atomic-write';
import { ArtifactStoreError, StoreObjectNotFoundError } from './errors';
import { checkKey, fileStoreUri, type ArtifactStore, type StoredObject, type WriteResult } from './store';

/** Creates `file` with O_EXCL: false when it exists. */
async function createExclusively(file: string, content: Uint8Array | string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'wx');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    await handle.writeFile(typeof content === 'string' ? Buffer.from(content, 'utf8') : content);
    await handle.sync();
  } finally {
    await handle.close();
  }
  return true;
}

/** `file://<dir>`: today's behaviour, objects are files below `dir` written with temp file + rename. */
export function openFileStore(dir: string): ArtifactStore {
  const rootDir = path.resolve(dir);
  const root = fileStoreUri(rootDir);
  const fileOf = (key: string) => path.join(rootDir, ...checkKey(root, key).split('/'));
  const copy = (from: string, to: string) =>
    writeFileAtomically(to, async (write) => {
      for await (const chunk of createReadStream(from)) await write(chunk as Buffer);
    });
  return {
    root,
    uriOf: (key) => fileStoreUri(fileOf(key)),
    keyOf(uri) {
      const file = uri.startsWith('file://') ? new URL(uri).pathname : path.resolve(uri);
      const relative = path.relative(rootDir, decodeURIComponent(file));
      return relative === '' || relative.startsWith('..') || path.isAbsolute(relative) ? null : relative.split(path.sep).join('/');
    },
    async ready() {
      await mkdir(rootDir, { recursive: true }).catch((error: unknown) => {
        throw new ArtifactStoreError(root, `artifact store ${root}: cannot create ${rootDir}: ${(error as Error).message}`, {
          cause: error,
        });
      });
    },
    putFile: (key, localPath) => copy(localPath, fileOf(key)),
    putBytes: (key, content) => writeBytesAtomically(fileOf(key), content),
    async getFile(key, localPath): Promise<WriteResult> {
      const file = fileOf(key);
      try {
        await stat(file);
      } catch {
        throw new StoreObjectNotFoundError(fileStoreUri(file), `artifact store: ${file} does not exist`);
      }
      return copy(file, localPath);
    },
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
    async list(prefix) {
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
          } else if (entry.isFile() && key.startsWith(prefix) && !/\.tmp-\d+-[0-9a-f]+$/.test(key)) {
            out.push({ key, bytes: (await stat(path.join(dir, entry.name))).size, sha256: null });
          }
        }
      };
      await walk(rootDir, '');
      return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    },
    async delete(key) {
      await rm(fileOf(key), { force: true });
    },
    async putBytesIfAbsent(key, content) {
      // The whole content goes to a temp file first, then link(2) gives it its name: link fails with EEXIST
      // on an existing name, atomically, and a reader never sees a partly written object.
      const file = fileOf(key);
      await mkdir(path.dirname(file), { recursive: true });
      const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
      const handle = await open(tmp, 'wx');
      try {
        await handle.writeFile(typeof content === 'string' ? Buffer.from(content, 'utf8') : content);
        await handle.sync();
      } finally {
        await handle.close();
      }
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
    },
    conditionalWrites: () => Promise.resolve('atomic' as const),
  };
}
