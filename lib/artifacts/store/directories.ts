import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ArtifactStore } from './store';
import { StoreIntegrityError } from './errors';

/**
 * A directory tree in the store with a completion marker as its commit record (README "Deployment: several machines": checkpoints).
 *
 *     <prefix>/<relative path>     every file of the tree (each written atomically)
 *     <markerKey>                  JSON { files: [{ path, sha256, bytes }], …extra }, written LAST
 *
 * A reader trusts a tree only through its marker: a writer killed half-way leaves files without a marker,
 * which nobody reads (the next push of the same tree overwrites them). The marker names every file with its
 * sha256, so a pull verifies what it downloads.
 */
export const DirectoryMarkerSchema = z.object({
  prefix: z.string().min(1),
  files: z.array(z.object({ path: z.string().min(1), sha256: z.string().regex(/^[0-9a-f]{64}$/), bytes: z.number().int().min(0) })),
  extra: z.record(z.string(), z.unknown()).default({}),
  pushedAt: z.string(),
});
export type DirectoryMarker = z.infer<typeof DirectoryMarkerSchema>;

/** Every regular file below `dir`, as `/`-separated paths relative to it, sorted. */
export async function listTreeFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (abs: string, rel: string) => {
    for (const entry of await readdir(abs, { withFileTypes: true })) {
      const childRel = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) await walk(path.join(abs, entry.name), childRel);
      else if (entry.isFile()) out.push(childRel);
    }
  };
  await walk(dir, '');
  return out.sort();
}

/**
 * Uploads the tree at `localDir` under `prefix`, then its marker at `markerKey` (last: the commit record).
 * Files are uploaded in sorted order, so a tree's own completion file (e.g. the trainer's COMPLETE) is just one
 * more file: only the store marker makes the tree visible. `publish` writes the marker (default: a plain
 * put; a training segment publishes under its run lease, lib/store-sync/fencing.ts). Returns the marker written.
 */
export async function pushDirectory(
  store: ArtifactStore,
  localDir: string,
  prefix: string,
  markerKey: string,
  extra: Record<string, unknown> = {},
  publish: (markerKey: string, marker: DirectoryMarker) => Promise<void> = (key, marker) =>
    store.putBytes(key, `${JSON.stringify(marker, null, 2)}\n`).then(() => undefined),
): Promise<DirectoryMarker> {
  const files: DirectoryMarker['files'] = [];
  for (const rel of await listTreeFiles(localDir)) {
    const written = await store.putFile(`${prefix}/${rel}`, path.join(localDir, rel));
    files.push({ path: rel, sha256: written.sha256, bytes: written.bytes });
  }
  const marker: DirectoryMarker = { prefix, files, extra, pushedAt: new Date().toISOString() };
  await publish(markerKey, marker);
  return marker;
}

/** The marker at `markerKey`, or null when there is none (or it is not a marker). */
export async function readDirectoryMarker(store: ArtifactStore, markerKey: string): Promise<DirectoryMarker | null> {
  const bytes = await store.getBytes(markerKey);
  if (bytes === null) return null;
  try {
    const parsed = DirectoryMarkerSchema.safeParse(JSON.parse(bytes.toString('utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * Downloads the tree a marker commits into `localDir`, atomically: into a hidden sibling first, each file
 * checked against the marker's sha256, then renamed into place (an existing `localDir` is replaced). A pull
 * killed half-way leaves only the hidden sibling, which the next pull deletes.
 */
export async function pullDirectory(store: ArtifactStore, markerKey: string, localDir: string): Promise<DirectoryMarker> {
  const marker = await readDirectoryMarker(store, markerKey);
  if (!marker) throw new StoreIntegrityError(store.uriOf(markerKey), `artifact store: ${store.uriOf(markerKey)} is not a directory marker`);
  const parent = path.dirname(localDir);
  const tmp = path.join(parent, `.${path.basename(localDir)}.pull-${process.pid}-${Date.now()}`);
  await mkdir(parent, { recursive: true });
  for (const name of await readdir(parent)) {
    if (name.startsWith(`.${path.basename(localDir)}.pull-`)) await rm(path.join(parent, name), { recursive: true, force: true });
  }
  try {
    for (const file of marker.files) {
      const target = path.join(tmp, ...file.path.split('/'));
      await mkdir(path.dirname(target), { recursive: true });
      const got = await store.getFile(`${marker.prefix}/${file.path}`, target);
      if (got.sha256 !== file.sha256) {
        throw new StoreIntegrityError(
          store.uriOf(`${marker.prefix}/${file.path}`),
          `artifact store: ${store.uriOf(`${marker.prefix}/${file.path}`)} has sha256 ${got.sha256}, its marker ${markerKey} says ${file.sha256}`,
        );
      }
    }
    await rm(localDir, { recursive: true, force: true });
    await rename(tmp, localDir);
  } catch (error) {
    await rm(tmp, { recursive: true, force: true });
    throw error;
  }
  return marker;
}

/** Whether a local path is a directory. */
export async function isLocalDirectory(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch {
    return false;
  }
}
