import { constants } from 'node:fs';
import { chmod, lstat, open, readdir, rmdir, unlink, type FileHandle } from 'node:fs/promises';

const errno = (err: unknown) => (err as NodeJS.ErrnoException).code;

/** Opens a directory without following a symlink in its last component (ELOOP/ENOTDIR if it is anything else). */
const openDir = (p: string) => open(p, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);

/**
 * Removes a task's directory and everything in it without ever following what the task left there. Each directory is
 * opened (O_NOFOLLOW) and then read and emptied through /proc/self/fd/<fd>, the directory actually opened: a
 * component swapped for a symlink after the check cannot redirect the removal elsewhere (the same guarantee as
 * openat/unlinkat, which Node does not offer). unlink and rmdir never follow their last component. Called once every
 * process of the run is dead, so nothing races it in the sandboxed modes; the fd walk is for the unsandboxed one.
 */
export async function removeTaskDir(dir: string): Promise<void> {
  let handle: FileHandle;
  try {
    handle = await openDir(dir);
  } catch (err) {
    if (errno(err) === 'ENOENT') return;
    throw err;
  }
  try {
    await emptyDir(handle);
  } finally {
    await handle.close();
  }
  await rmdir(dir);
}

async function emptyDir(dir: FileHandle): Promise<void> {
  const here = `/proc/self/fd/${dir.fd}`;
  let names: string[];
  try {
    names = await readdir(here);
  } catch (err) {
    if (errno(err) !== 'EACCES') throw err;
    // a task's own `chmod 000 sub`: the worker (not root) owns it, so it may open it up again; through the fd, so
    // whatever is at the path now is not touched
    await chmod(here, 0o700);
    names = await readdir(here);
  }
  for (const name of names) {
    const p = `${here}/${name}`;
    const st = await lstat(p).catch((err: unknown) => (errno(err) === 'ENOENT' ? undefined : Promise.reject(err)));
    if (!st) continue;
    if (!st.isDirectory()) {
      await unlink(p);
      continue;
    }
    let sub: FileHandle;
    try {
      sub = await openDir(p);
    } catch (err) {
      // no longer a directory (a symlink or file now): unlink it, never follow it
      if (errno(err) === 'ELOOP' || errno(err) === 'ENOTDIR') {
        await unlink(p);
        continue;
      }
      if (errno(err) !== 'EACCES') throw err;
      await chmod(p, 0o700);
      sub = await openDir(p);
    }
    try {
      await emptyDir(sub);
    } finally {
      await sub.close();
    }
    await rmdir(p);
  }
}
