import { constants } from 'node:fs';
import { open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';

/** What opening one declared artifact file found. */
export type ConfinedFile =
  /** open: the caller streams it from `handle` (`size` bytes, checked against the bound) and closes it */
  | { kind: 'file'; handle: FileHandle; size: number }
  | { kind: 'missing' }
  | { kind: 'not-a-file' }
  /** larger than the bound: nothing was read */
  | { kind: 'too-large'; size: number }
  /** a hard link (more than one name), or a file some other uid than the run's owns: the worker never reads it */
  | { kind: 'not-the-runs'; why: string }
  /** the path (through a symlink) leads out of the task's directory, to `target` */
  | { kind: 'outside'; target: string };

/** True when `p` is strictly below `base` (both absolute, symlink-free). */
export function isInside(base: string, p: string): boolean {
  const rel = path.relative(base, p);
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel);
}

const errno = (err: unknown) => (err as NodeJS.ErrnoException).code;

/** Where `relPath` leads: a path below `realBase` (symlink-free), or why not. */
export async function locateConfined(realBase: string, relPath: string): Promise<{ kind: 'path'; real: string } | Exclude<ConfinedFile, { kind: 'file' }>> {
  let real: string;
  try {
    real = await realpath(path.resolve(realBase, relPath));
  } catch (err) {
    if (errno(err) === 'ENOENT' || errno(err) === 'ENOTDIR') return { kind: 'missing' };
    if (errno(err) === 'ELOOP') return { kind: 'not-a-file' };
    throw err;
  }
  if (real === realBase) return { kind: 'not-a-file' };
  if (!isInside(realBase, real)) return { kind: 'outside', target: real };
  return { kind: 'path', real };
}

/** What the file must be to be read: its owner (the run's uid) and its largest size. */
export interface ArtifactRules {
  /** the uid the run's files belong to (undefined: not checked, the worker's own files) */
  uid?: number;
  maxBytes: number;
}

/**
 * Opens `relPath` only if it is a regular file inside `realBase` (the task directory's real path, taken before the
 * command ran, so a task that swaps its directory for a symlink afterwards is caught too), owned by the run's uid,
 * with one name, and at most `rules.maxBytes` long; the size is the opened file's (fstat), taken before a byte is
 * read, and the caller streams from the handle. The worker reads with its own rights (root's, with --task-user):
 *  - a symlink `out.txt -> /etc/shadow` must not be followed out: the file is opened without following a final
 *    symlink, and on Linux the opened file's path (/proc/self/fd) is checked again, since a process of the task could
 *    swap a path component between the check and the open;
 *  - a hard link to a file outside (possible where fs.protected_hardlinks is 0, which a container inherits from its
 *    host) names that file from inside: more than one name, or an owner other than the run, is refused;
 *  - a 1.5 GB sparse file read whole took a worker to 6.2 GB: the size is checked first.
 * O_NONBLOCK: opening a FIFO the task left would otherwise block the worker.
 */
export async function openConfined(realBase: string, relPath: string, rules: ArtifactRules): Promise<ConfinedFile> {
  const located = await locateConfined(realBase, relPath);
  if (located.kind !== 'path') return located;
  const real = located.real;
  let handle;
  try {
    handle = await open(real, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOFOLLOW);
  } catch (err) {
    if (errno(err) === 'ENOENT') return { kind: 'missing' };
    // the last component became a symlink after realpath looked
    if (errno(err) === 'ELOOP') return { kind: 'outside', target: real };
    throw err;
  }
  let keep = false;
  try {
    if (process.platform === 'linux') {
      const opened = await readlink(`/proc/self/fd/${handle.fd}`);
      if (!isInside(realBase, opened)) return { kind: 'outside', target: opened };
    }
    const st = await handle.stat();
    if (!st.isFile()) return { kind: 'not-a-file' };
    if (st.nlink > 1) return { kind: 'not-the-runs', why: `it has ${st.nlink} names (a hard link)` };
    if (rules.uid !== undefined && st.uid !== rules.uid) return { kind: 'not-the-runs', why: `uid ${st.uid} owns it, not the run (uid ${rules.uid})` };
    if (st.size > rules.maxBytes) return { kind: 'too-large', size: st.size };
    keep = true;
    return { kind: 'file', handle, size: st.size };
  } finally {
    if (!keep) await handle.close();
  }
}
