import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';

export interface DirLock {
  path: string;
  release(): void;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the lock file `lockPath` for this process (it holds the pid), so that two processes never use
 * one embedded database or `tgs dev` data directory. A lock left by a process that no longer runs is
 * taken over. Throws a message that says who holds it and what to do.
 */
export function acquireDirLock(lockPath: string, what: string, hint = 'stop that process, or use another directory'): DirLock {
  mkdirSync(path.dirname(lockPath), { recursive: true });
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(lockPath, 'wx');
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        process.off('exit', release);
        try {
          if (readFileSync(lockPath, 'utf8').trim() === String(process.pid)) unlinkSync(lockPath);
        } catch {
          // already gone
        }
      };
      // A lock must not outlive its process even when cleanup code never runs.
      process.on('exit', release);
      return { path: lockPath, release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    let holder = NaN;
    try {
      holder = Number(readFileSync(lockPath, 'utf8').trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    if (Number.isInteger(holder) && holder > 0 && alive(holder)) {
      throw new Error(`${what} is in use by process ${holder}${holder === process.pid ? ' (this process)' : ''} (lock file ${lockPath}); ${hint}`);
    }
    // Stale: its process is gone.
    try {
      unlinkSync(lockPath);
    } catch {
      // someone else removed it first
    }
  }
  throw new Error(`cannot take the lock file ${lockPath} for ${what}`);
}
