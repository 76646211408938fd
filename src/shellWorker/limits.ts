import { existsSync, readFileSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';

/**
 * What one run may use (`tgs shell-worker --max-memory …`), and how each bound is held:
 *  - memory, processes (tasks: threads count), CPU: a cgroup of the run's own (cgroup v1's memory, pids and cpu
 *    controllers, or a cgroup v2 subtree the worker may write), created below the worker's own cgroup, so the
 *    worker's own limits still hold around every run. Without a writable cgroup these three are not bounded (the
 *    start line says so), but for RLIMIT_NPROC below.
 *  - processes again: RLIMIT_NPROC (prlimit) when the run has a uid of its own (it counts per uid).
 *  - file size: RLIMIT_FSIZE (prlimit): a write past it fails, and the process gets SIGXFSZ.
 *  - /tmp and /var/tmp (bwrap): tmpfs --size; their pages count towards the run's memory too.
 *  - the task directory: its allocated size is measured every second, and a run past the bound is killed (between
 *    two checks a run can write at the disk's speed, each file at most the file size bound).
 */
export interface RunLimits {
  memoryBytes: number;
  processes: number;
  cpus: number;
  tmpBytes: number;
  fileBytes: number;
  taskDirBytes: number;
}

const GiB = 1024 ** 3;
export const DEFAULT_LIMITS: RunLimits = {
  memoryBytes: 4 * GiB,
  processes: 4096,
  cpus: availableParallelism(),
  tmpBytes: 1 * GiB,
  fileBytes: 16 * GiB,
  taskDirBytes: 16 * GiB,
};

/** `512M`, `2G`, `1.5GiB`, `4096` (bytes). */
export function parseSize(flag: string, text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  const unit = m ? { '': 1, k: 1024, m: 1024 ** 2, g: GiB, t: 1024 ** 4 }[m[2].toLowerCase() as '' | 'k' | 'm' | 'g' | 't'] : NaN;
  const bytes = m ? Math.floor(Number(m[1]) * unit) : NaN;
  if (!(bytes >= 4096)) throw new Error(`${flag} ${JSON.stringify(text)}: give a size of at least 4K, e.g. 512M or 4G`);
  return bytes;
}

export const fmtBytes = (n: number) => (n >= GiB && n % (GiB / 4) === 0 ? `${n / GiB} GiB` : `${Math.round(n / 1024 ** 2)} MiB`);

/** Where the run cgroups of this process go, per controller (v1) or once (v2); undefined parts are unavailable. */
export interface CgroupPlan {
  version: 1 | 2;
  /** controller → the directory run cgroups are created in */
  parents: Partial<Record<'memory' | 'pids' | 'cpu', string>>;
}

/** This process's own cgroup path per v1 controller, and its v2 path (`0::`), from /proc/self/cgroup. */
function ownCgroups(): { v1: Record<string, string>; v2?: string } {
  const v1: Record<string, string> = {};
  let v2: string | undefined;
  for (const line of readFileSync('/proc/self/cgroup', 'utf8').trim().split('\n')) {
    const [, controllers, p] = /^\d+:([^:]*):(.*)$/.exec(line) ?? [];
    if (controllers === undefined) continue;
    if (controllers === '') v2 = p;
    for (const c of controllers.split(',')) v1[c] = p;
  }
  return { v1, v2 };
}

/**
 * The cgroups this worker can make runs' cgroups in, tried once at start (a cgroup created and removed in each).
 * cgroup v2 needs the worker's cgroup to delegate the controllers to its children (cgroup.subtree_control): a
 * container with its own cgroup namespace, or a systemd unit with Delegate=yes whose processes sit in a leaf.
 */
export async function planCgroups(): Promise<{ plan?: CgroupPlan; why: string }> {
  if (process.platform !== 'linux') return { why: 'not Linux' };
  const own = ownCgroups();
  const tryParent = async (dir: string) => {
    const probe = path.join(dir, `tgs-probe-${process.pid}`);
    try {
      await mkdir(probe);
      await rmdir(probe);
      return true;
    } catch {
      return false;
    }
  };
  if (existsSync('/sys/fs/cgroup/cgroup.controllers') && own.v2 !== undefined) {
    const parent = path.join('/sys/fs/cgroup', own.v2);
    const enabled = await readFile(path.join(parent, 'cgroup.subtree_control'), 'utf8').catch(() => '');
    const parents: CgroupPlan['parents'] = {};
    if (await tryParent(parent)) for (const c of ['memory', 'pids', 'cpu'] as const) if (enabled.split(/\s+/).includes(c)) parents[c] = parent;
    return Object.keys(parents).length ? { plan: { version: 2, parents }, why: `cgroup v2 below ${parent} (${Object.keys(parents).join(', ')})` } : { why: `cgroup v2: ${parent} is not writable or delegates none of memory, pids, cpu (cgroup.subtree_control)` };
  }
  const parents: CgroupPlan['parents'] = {};
  for (const c of ['memory', 'pids', 'cpu'] as const) {
    const mount = `/sys/fs/cgroup/${c}`;
    if (own.v1[c] === undefined || !existsSync(path.join(mount, 'cgroup.procs'))) continue;
    const parent = path.join(mount, own.v1[c]);
    if (await tryParent(parent)) parents[c] = parent;
  }
  const have = Object.keys(parents);
  return have.length ? { plan: { version: 1, parents }, why: `cgroup v1 (${have.join(', ')}) below this worker's own cgroups` } : { why: 'no cgroup controller (memory, pids, cpu) this worker may write' };
}

/** One run's cgroup(s): created before its command, the command's first process moved in, removed after. */
export interface RunCgroup {
  /** moves `pid` (the wrapper, before it starts anything) into every controller's cgroup */
  add(pid: number): Promise<void>;
  /** what the kernel refused the run, for its log (read after the command ended) */
  report(): Promise<string[]>;
  /** removes the cgroups once no process of the run is left */
  remove(): Promise<void>;
}

const PERIOD_US = 100_000;

export async function createRunCgroup(plan: CgroupPlan, name: string, limits: RunLimits): Promise<RunCgroup> {
  const dirs: Partial<Record<'memory' | 'pids' | 'cpu', string>> = {};
  const made = new Set<string>();
  const write = (dir: string, file: string, value: string | number) => writeFile(path.join(dir, file), String(value));
  try {
    for (const [c, parent] of Object.entries(plan.parents) as ['memory' | 'pids' | 'cpu', string][]) {
      const dir = path.join(parent, name);
      if (!made.has(dir)) {
        await mkdir(dir);
        made.add(dir);
      }
      dirs[c] = dir;
    }
    if (plan.version === 1) {
      if (dirs.memory) {
        await write(dirs.memory, 'memory.limit_in_bytes', limits.memoryBytes);
        // with swap accounting, swap counts too (the limit would otherwise only move pages to swap)
        if (existsSync(path.join(dirs.memory, 'memory.memsw.limit_in_bytes'))) await write(dirs.memory, 'memory.memsw.limit_in_bytes', limits.memoryBytes);
      }
      if (dirs.pids) await write(dirs.pids, 'pids.max', limits.processes);
      if (dirs.cpu) {
        await write(dirs.cpu, 'cpu.cfs_period_us', PERIOD_US);
        await write(dirs.cpu, 'cpu.cfs_quota_us', Math.round(limits.cpus * PERIOD_US));
      }
    } else {
      if (dirs.memory) {
        await write(dirs.memory, 'memory.max', limits.memoryBytes);
        await write(dirs.memory, 'memory.swap.max', 0).catch(() => undefined);
      }
      if (dirs.pids) await write(dirs.pids, 'pids.max', limits.processes);
      if (dirs.cpu) await write(dirs.cpu, 'cpu.max', `${Math.round(limits.cpus * PERIOD_US)} ${PERIOD_US}`);
    }
  } catch (err) {
    for (const dir of made) await rmdir(dir).catch(() => undefined);
    throw err;
  }
  const read = (dir: string | undefined, file: string) => (dir ? readFile(path.join(dir, file), 'utf8').catch(() => '') : Promise.resolve(''));
  return {
    add: async (pid) => {
      for (const dir of made) await write(dir, 'cgroup.procs', pid);
    },
    report: async () => {
      const lines: string[] = [];
      const oom = plan.version === 1 ? /oom_kill (\d+)/.exec(await read(dirs.memory, 'memory.oom_control')) : /oom_kill (\d+)/.exec(await read(dirs.memory, 'memory.events'));
      if (oom && Number(oom[1]) > 0) lines.push(`the run reached its memory bound of ${fmtBytes(limits.memoryBytes)} (--max-memory): the kernel killed ${oom[1]} of its processes`);
      const forks = /^max (\d+)$/m.exec(await read(dirs.pids, 'pids.events'));
      if (forks && Number(forks[1]) > 0) lines.push(`the run reached its bound of ${limits.processes} processes and threads (--max-processes): ${forks[1]} forks were refused`);
      return lines;
    },
    remove: async () => {
      for (const dir of made) {
        // a cgroup whose last process just exited may still be busy for a moment
        for (let i = 0; ; i++) {
          try {
            await rmdir(dir);
            break;
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT' || i >= 50) break;
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      }
    },
  };
}

/**
 * `prlimit` arguments for a run: its file size, no core dumps, and (with a uid of its own) its process count, twice
 * the bound when the pids cgroup holds it (the cgroup then acts first, and its refusals are counted for the log).
 */
export function rlimitArgs(limits: RunLimits, ownUid: boolean, pidsCgroup: boolean): string[] {
  return [`--fsize=${limits.fileBytes}`, '--core=0', ...(ownUid ? [`--nproc=${limits.processes * (pidsCgroup ? 2 : 1)}`] : [])];
}

/**
 * The allocated size of everything below `dir` (blocks, so a sparse file counts what it holds), not following
 * symlinks; stops counting once past `stopAbove`.
 */
export async function allocatedBytes(dir: string, stopAbove: number): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length > 0 && total <= stopAbove) {
    const d = stack.pop() as string;
    let entries: string[];
    try {
      entries = await readdir(d);
    } catch {
      continue;
    }
    for (const name of entries) {
      const p = path.join(d, name);
      try {
        const st = await lstat(p);
        total += st.blocks * 512;
        if (st.isDirectory()) stack.push(p);
      } catch {
        // gone meanwhile
      }
    }
  }
  return total;
}
