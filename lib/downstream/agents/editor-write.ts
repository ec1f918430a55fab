import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import path from 'node:path';
import { startProcessGroup } from '../../process';
import { findExecutable } from '../../sandbox/executables';
import { EDITOR_LIMITS } from '../../sandbox/limits';
import { namespaceArgs, probeNamespace, type NamespaceProbe, type SandboxIsolation } from '../../sandbox/namespace';

/**
 * How the editor's writes reach the disk. The path guard (lib/sandbox/paths.ts guardWritePath) checks a path
 * at one moment; an outside process that flips a checked directory into a symlink afterwards would redirect
 * an in-process write. So in `namespace` isolation every write runs as a small program inside a writable
 * bubblewrap view of the worktree (lib/sandbox/namespace.ts): there, nothing outside the worktree exists, so
 * a flipped link can lead nowhere but back into the worktree, into the sandbox's own throw-away /tmp, or onto
 * a read-only system directory. Paths reach that program as positional arguments of a fixed script, never as
 * shell code, and content arrives on stdin.
 *
 * `filter-only` (for machines without user namespaces; the README's Security section says what it gives up)
 * writes in-process with O_NOFOLLOW/O_EXCL on the checked path, the editor's behaviour before the namespace.
 */
export type WriteOutcome = { ok: true } | { ok: false; message: string };

export interface FileWriter {
  /** Makes the missing parents of `relative` and writes a new file there; fails if anything is already at `relative`. */
  create(root: string, relative: string, text: string): Promise<WriteOutcome>;
  /** Replaces the file at `relative` by `text` with permission bits `mode`: a new file renamed over the old one. */
  replace(root: string, relative: string, text: string, mode: number): Promise<WriteOutcome>;
}

export type WriterChoice = { ok: true; writer: FileWriter } | { ok: false; message: string };

/**
 * `set -C` (noclobber) makes `>` open with O_EXCL, so a file or link that appeared meanwhile is never
 * overwritten or followed. `$1` the directory to make (`.` at the top), `$2` the file.
 */
const CREATE_SCRIPT = 'set -eC; mkdir -p -- "$1"; cat > "$2"';
/**
 * Written to a fresh temporary name beside the file, then renamed over it: a reader never sees half a file,
 * and a hard link swapped in for the target is replaced, not written through. The temporary file goes
 * whatever happens. `$1` temporary, `$2` target, `$3` octal mode.
 */
const REPLACE_SCRIPT = 'set -eC; trap \'rm -f -- "$1"\' EXIT; cat > "$1"; chmod -- "$3" "$1"; mv -f -T -- "$1" "$2"; trap - EXIT';

const STDERR_KEPT_BYTES = 2048;

function operand(relative: string): string {
  return relative.startsWith('/') ? relative : `./${relative}`;
}

function namespaceWriter(bwrap: string, shell: string): FileWriter {
  const run = async (root: string, script: string, args: string[], text: string, what: string): Promise<WriteOutcome> => {
    const err: Buffer[] = [];
    let errBytes = 0;
    const argv = [...namespaceArgs({ root, writable: true }, root, [shell]), shell, '-c', script, 'editor-write', ...args];
    const group = startProcessGroup(bwrap, argv, {
      cwd: root,
      env: { PATH: '/usr/bin:/bin', LC_ALL: 'C' },
      stdin: text,
      stdout: 'ignore',
      stderr: (chunk) => {
        if (errBytes < STDERR_KEPT_BYTES) err.push(chunk);
        errBytes += chunk.length;
      },
      timeoutMs: EDITOR_LIMITS.writeTimeoutMs,
    });
    const exit = await group.exited;
    if (exit.spawnError) return { ok: false, message: `cannot ${what}: the sandbox could not start (${exit.spawnError.message})` };
    if (exit.stoppedFor === 'timeout')
      return { ok: false, message: `cannot ${what}: the write took longer than ${EDITOR_LIMITS.writeTimeoutMs} ms` };
    if (exit.code === 0) return { ok: true };
    const detail = Buffer.concat(err).toString('utf8').slice(0, STDERR_KEPT_BYTES).trim().split('\n').slice(-1)[0] ?? '';
    return {
      ok: false,
      message: `cannot ${what} (${detail.replace(/^editor-write: (\d+: )?/, '') || `exit ${exit.code ?? exit.signal}`})`,
    };
  };
  return {
    create: (root, relative, text) =>
      run(root, CREATE_SCRIPT, [operand(path.dirname(relative)), operand(relative)], text, `create ${relative}`),
    replace: (root, relative, text, mode) => {
      const temporary = path.join(path.dirname(relative), `.editor-${randomBytes(8).toString('hex')}.tmp`);
      return run(root, REPLACE_SCRIPT, [operand(temporary), operand(relative), (mode & 0o7777).toString(8)], text, `write ${relative}`);
    },
  };
}

const code = (error: unknown) => (error as NodeJS.ErrnoException).code ?? String(error);

/** In-process writes on the checked path (filter-only isolation). */
const inProcessWriter: FileWriter = {
  async create(root, relative, text) {
    const absolute = path.join(root, relative);
    try {
      await fs.mkdir(path.dirname(absolute), { recursive: true });
      // 'wx' = O_CREAT|O_EXCL: fails on anything already there, a dangling symlink included.
      await fs.writeFile(absolute, text, { flag: 'wx' });
      return { ok: true };
    } catch (error) {
      return { ok: false, message: `cannot create ${relative} (${code(error)})` };
    }
  },
  async replace(root, relative, text) {
    try {
      // O_NOFOLLOW: the checked path has no symlink; if one was swapped in since, refuse rather than follow.
      const handle = await fs.open(path.join(root, relative), constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW);
      try {
        await handle.writeFile(text, 'utf8');
      } finally {
        await handle.close();
      }
      return { ok: true };
    } catch (error) {
      return { ok: false, message: `cannot write ${relative} (${code(error)})` };
    }
  },
};

/**
 * The writer for `isolation`. `namespace` (the default) needs bubblewrap and user namespaces; where
 * probeNamespace (`probeSandbox`, replaceable for tests) says they are missing, the answer is a refusal naming the reason and the switch, never a
 * silent fall-back to the weaker in-process writes.
 */
export async function chooseWriter(
  isolation: SandboxIsolation,
  probeSandbox: () => Promise<NamespaceProbe> = probeNamespace,
): Promise<WriterChoice> {
  if (isolation === 'filter-only') return { ok: true, writer: inProcessWriter };
  const probe = await probeSandbox();
  if (!probe.ok) {
    return {
      ok: false,
      message: `the editor cannot write: its OS sandbox is unavailable (${probe.reason}); install bubblewrap and allow user namespaces, or set sandbox.isolation: 'filter-only' to write with path checks alone`,
    };
  }
  const shell = findExecutable('sh') ?? '/bin/sh';
  return { ok: true, writer: namespaceWriter(probe.bwrap, shell) };
}
