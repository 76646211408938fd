import { constants } from 'node:fs';
import { open, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';

/** What reading one declared artifact file found. */
export type ConfinedFile =
  | { kind: 'file'; data: Buffer }
  | { kind: 'missing' }
  | { kind: 'not-a-file' }
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

/**
 * Reads `relPath` only if it is a regular file inside `realBase` (the task directory's real path, taken before the
 * command ran, so a task that swaps its directory for a symlink afterwards is caught too). The worker reads with its
 * own rights (root's, with --task-user), so a symlink `out.txt -> /etc/shadow` must not be followed out. A task
 * process that outlived the command could swap a path component between the check and the open: the file is opened
 * without following a final symlink, and on Linux the opened file's path (/proc/self/fd) is checked again.
 * O_NONBLOCK: opening a FIFO the task left would otherwise block the worker.
 */
export async function readConfined(realBase: string, relPath: string): Promise<ConfinedFile> {
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
  try {
    if (process.platform === 'linux') {
      const opened = await readlink(`/proc/self/fd/${handle.fd}`);
      if (!isInside(realBase, opened)) return { kind: 'outside', target: opened };
    }
    if (!(await handle.stat()).isFile()) return { kind: 'not-a-file' };
    return { kind: 'file', data: await handle.readFile() };
  } finally {
    await handle.close();
  }
}
