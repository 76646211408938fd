import { execFileSync } from 'node:child_process';

/** The OS account tasks run as (`tgs shell-worker --task-user NAME`). */
export interface TaskUser {
  name: string;
  uid: number;
  gid: number;
}

/** One line of passwd(5): `name:password:uid:gid:gecos:home:shell`. */
export function parsePasswdLine(line: string): TaskUser | undefined {
  const f = line.trim().split(':');
  if (f.length < 7 || !/^[0-9]+$/.test(f[2]) || !/^[0-9]+$/.test(f[3])) return undefined;
  return { name: f[0], uid: Number(f[2]), gid: Number(f[3]) };
}

/** The account through NSS (getent), so users of LDAP and the like work as well as /etc/passwd's. */
function lookup(name: string): TaskUser | undefined {
  try {
    return parsePasswdLine(execFileSync('getent', ['passwd', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
  } catch {
    return undefined;
  }
}

/**
 * Checks `--task-user NAME` before the worker claims anything. Only root can start processes as another user; a
 * worker that is not root refuses to start instead of running tasks as itself, where they could read its
 * credentials (/proc/<pid>/environ, its files). `uid` is the worker's (a parameter so the refusal is testable).
 */
export function resolveTaskUser(name: string, uid: number | undefined = process.getuid?.()): TaskUser {
  if (uid !== 0) {
    throw new Error(
      `--task-user ${name}: running tasks as another user needs root, and this worker runs as ${uid === undefined ? 'a platform without user ids' : `uid ${uid}`}. ` +
        'Start tgs shell-worker as root (each task then runs as that user), or leave out --task-user (tasks then run as the worker\'s own user and can read its credentials).',
    );
  }
  if (!/^[a-z_][a-z0-9_.-]{0,31}\$?$/i.test(name)) throw new Error(`--task-user ${JSON.stringify(name)}: not a user name`);
  const user = lookup(name);
  if (!user) throw new Error(`--task-user ${name}: no such user on this machine (create one, e.g. useradd --system --no-create-home ${name})`);
  if (user.uid === 0) throw new Error(`--task-user ${name}: that is uid 0 (root); give an unprivileged user`);
  return user;
}
