import { promises as fs } from 'node:fs';
import path from 'node:path';

/**
 * Allocated bytes under a path, like `du -s`: symlinks are counted as links and never followed, and an
 * inode seen before (a hard link, e.g. objects a local clone shares with its mirror) is counted once per
 * `seen` set — pass one set across several calls to count sharing between trees once overall.
 * `exclude` names absolute paths not to descend into.
 */
export async function diskUsage(root: string, opts: { seen?: Set<string>; exclude?: ReadonlySet<string> } = {}): Promise<number> {
  const seen = opts.seen ?? new Set<string>();
  let total = 0;
  const stack: string[] = [path.resolve(root)];
  while (stack.length > 0) {
    const batch = stack.splice(-64);
    const stats = await Promise.all(
      batch.map((p) =>
        fs
          .lstat(p, { bigint: true })
          .then((st) => ({ p, st }))
          .catch(() => undefined),
      ),
    );
    const dirs: string[] = [];
    for (const item of stats) {
      if (!item || opts.exclude?.has(item.p)) continue;
      const id = `${item.st.dev}:${item.st.ino}`;
      if (seen.has(id)) continue;
      seen.add(id);
      total += item.st.blocks > 0n ? Number(item.st.blocks) * 512 : Number(item.st.size);
      if (item.st.isDirectory()) dirs.push(item.p);
    }
    const listings = await Promise.all(
      dirs.map((d) =>
        fs
          .readdir(d)
          .then((names) => names.map((n) => path.join(d, n)))
          .catch(() => []),
      ),
    );
    for (const children of listings) stack.push(...children);
  }
  return total;
}

/** Whether `p` is a directory itself, not a link to one (false when it cannot be read). */
export async function isDirectoryNoFollow(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    (st) => st.isDirectory(),
    () => false,
  );
}
