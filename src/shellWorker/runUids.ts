import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

/**
 * Per-run user ids (Taskcluster generic-worker's multiuser idea without creating accounts): every run of a sandboxed
 * task gets a uid (and the same gid) from a range no account uses, so two runs never share an identity, and when the
 * run ends every process of that uid is killed, whatever it did to escape its process group or session.
 */
export interface UidRange {
  first: number;
  last: number;
}

/** 1,500,000-1,565,535: above the ids Debian hands out (up to 59,999, then 65,534 nobody) and subuid's usual 100,000+ blocks. */
export const DEFAULT_UID_RANGE: UidRange = { first: 1_500_000, last: 1_565_535 };

/** `--uid-range FIRST-LAST`. */
export function parseUidRange(text: string): UidRange {
  const m = /^(\d+)-(\d+)$/.exec(text.trim());
  const first = m ? Number(m[1]) : NaN;
  const last = m ? Number(m[2]) : NaN;
  if (!m || first < 1000 || last < first || last > 4_294_967_294) {
    throw new Error(`--uid-range ${JSON.stringify(text)}: give FIRST-LAST, e.g. ${DEFAULT_UID_RANGE.first}-${DEFAULT_UID_RANGE.last} (ids at least 1000, no account of the machine among them)`);
  }
  return { first, last };
}

const execFileText = (file: string, args: string[], options: { uid?: number; gid?: number } = {}) =>
  new Promise<{ code: number; stdout: string }>((resolve) => {
    execFile(file, args, { encoding: 'utf8', env: {}, ...options }, (err, stdout) => resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) || 1 : 0, stdout }));
  });

/** Whether an account or group of the machine (through NSS) has this id: such an id is never a run's. */
async function namedId(id: number): Promise<boolean> {
  const [user, group] = await Promise.all([execFileText('getent', ['passwd', String(id)]), execFileText('getent', ['group', String(id)])]);
  return user.code === 0 || group.code === 0;
}

/** Pids of live (not zombie) processes whose real, effective, saved or filesystem uid is `uid`. */
export async function processesOf(uid: number): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let status: string;
    try {
      status = await readFile(`/proc/${name}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1].split(/\s+/).map(Number) ?? [];
    const state = /^State:\s+(\S)/m.exec(status)?.[1];
    if (state !== 'Z' && uids.includes(uid)) pids.push(Number(name));
  }
  return pids;
}

/** Rounds of the kill(-1) helper before giving up; a fork loop loses its whole tree at every kill, one round ends it in practice. */
const KILL_ROUNDS = 50;

/**
 * Kills every process of `uid` and resolves once none is left. A helper started as that uid calls kill(-1, SIGKILL):
 * the kernel then signals every process that uid may signal (all of its own, in any session, process group or
 * namespace it created) but the helper itself; repeated until /proc shows none, so a process forked during a round
 * dies in the next.
 */
export async function killEveryProcessOf(uid: number, gid: number): Promise<void> {
  for (let round = 1; round <= KILL_ROUNDS; round++) {
    // kill(-1) fails (ESRCH) when it finds nothing to signal, zombies included: at the first try (exit 3) the uid has
    // no process at all. Otherwise the loop is bounded (a zombie stays signalable until reaped; some kernels answer
    // success with nothing of the uid left) and /proc, which skips zombies, has the last word.
    const helper = await execFileText('/bin/sh', ['-c', 'kill -9 -1 2>/dev/null || exit 3; i=0; while kill -9 -1 2>/dev/null && [ $i -lt 100 ]; do i=$((i+1)); done; exit 0'], { uid, gid });
    if (helper.code === 3 || (await processesOf(uid)).length === 0) return;
  }
  throw new Error(`uid ${uid} still has processes (${(await processesOf(uid)).join(', ')}) after ${KILL_ROUNDS} rounds of kill -1`);
}

/**
 * Hands out the range's ids one run at a time. An id is skipped while a run of this process holds it, when an account
 * or group has it, and when a process still runs as it (a worker on the same machine with an overlapping range, or
 * the leftover of a worker that died): two workers on one machine should still get ranges of their own.
 */
export class UidPool {
  private readonly held = new Set<number>();
  private next: number;

  constructor(readonly range: UidRange) {
    // a random start: a restarted worker does not go straight back to the ids of the one before
    this.next = range.first + Math.floor(Math.random() * (range.last - range.first + 1));
  }

  async acquire(): Promise<number> {
    const size = this.range.last - this.range.first + 1;
    for (let tried = 0; tried < Math.min(size, 1000); tried++) {
      const id = this.next;
      this.next = id >= this.range.last ? this.range.first : id + 1;
      if (this.held.has(id)) continue;
      this.held.add(id);
      if ((await namedId(id)) || (await processesOf(id)).length > 0) {
        this.held.delete(id);
        continue;
      }
      return id;
    }
    throw new Error(`no free uid in ${this.range.first}-${this.range.last} (every id tried is held by a run, an account or a live process): give a larger --uid-range`);
  }

  release(id: number): void {
    this.held.delete(id);
  }
}

const pools = new Map<string, UidPool>();

/** One pool per range in this process: `tgs dev --workers N` runs N workers that must not share an id. */
export function uidPool(range: UidRange): UidPool {
  const key = `${range.first}-${range.last}`;
  let pool = pools.get(key);
  if (!pool) pools.set(key, (pool = new UidPool(range)));
  return pool;
}
