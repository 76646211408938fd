import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU time by process group, from /proc (Linux): where a scenario's time goes, without a profiler.
 * Processes that exit between two snapshots lose their share (pool connections and the services live
 * through a scenario, so little is missed).
 */
export type CpuSnapshot = Map<number, { group: string; ticks: number; role?: string }>;

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/**
 * The databases whose client backends are counted (once any is named): the machine's Postgres serves other clients
 * too (other test runs beside the bench), whose backends would otherwise count as the bench's 'postgres'. Their ended
 * backends still reach the postmaster's cutime, which cannot be split by database.
 */
const benchDatabases = new Set<string>();
export function countPostgresDatabase(name: string) {
  benchDatabases.add(name);
}

/**
 * A client backend's database from its title (`postgres: 15/main: user database [local] idle`, or `… 127.0.0.1(5432)
 * …`); undefined for the server's own processes (`postgres: 15/main: walwriter`, `… parallel worker for PID 12`).
 */
export const clientBackendDatabase = (title: string) => /^postgres: [^:]+: \S+ (\S+) (?:\[local\]|\S+\(\d+\))/.exec(title)?.[1];

const cmdlineOf = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');

/** The group a process is counted in, and for Postgres' processes what each does (postgresRole). */
function classify(pid: number, names: Map<number, string>): { group: string; role?: string } | undefined {
  const named = names.get(pid);
  if (named) return { group: named };
  let cmdline: string;
  try {
    cmdline = cmdlineOf(pid);
  } catch {
    return undefined;
  }
  // the backends (`postgres: 15/main: …`) and the postmaster, whose cutime holds the backends that ended
  if (/^postgres/.test(cmdline) || /\/bin\/postgres /.test(cmdline)) {
    const database = clientBackendDatabase(cmdline);
    if (database !== undefined && benchDatabases.size > 0 && !benchDatabases.has(database)) return undefined;
    return { group: 'postgres', role: postgresRole(cmdline) };
  }
  if (isBenchRabbitmq(cmdline)) return { group: 'rabbitmq' };
  // Temporal only as named (bench/stack.ts names its dev server): the dev servers of other test runs on the same
  // machine counted as the bench's, and one that ended during a scenario left a negative share (-0.18 ms a task)
  return undefined;
}

/**
 * The RabbitMQ node the bench publishes to, from its command line: an Erlang VM running RabbitMQ, but not the
 * rabbitmqctl CLI (an Erlang VM too, `-run escript … rabbitmqctl_escript`, ~1 s of CPU a call, which other test runs
 * and bench/run.ts start: one alive at one snapshot of a phase and gone at the next made RabbitMQ's CPU of that phase
 * negative, -180 ms a second) nor a node of the chaos suite's cluster (scripts/rabbitmqCluster.ts, under
 * /tmp/tgs-rabbitmq-cluster).
 */
export const isBenchRabbitmq = (cmdline: string) =>
  /beam\.smp/.test(cmdline) && /rabbit/.test(cmdline) && !/-run escript/.test(cmdline) && !/tgs-rabbitmq-cluster/.test(cmdline);

/**
 * What a Postgres process does, from its title: the postmaster (whose cutime holds its children that ended: closed
 * connections and autovacuum workers), a client's backend, autovacuum, or the WAL's writers (the WAL writer, the
 * checkpointer, the background writer).
 */
function postgresRole(cmdline: string): string {
  if (!cmdline.startsWith('postgres:')) return 'ended (postmaster)';
  if (/autovacuum/.test(cmdline)) return 'autovacuum';
  if (/walwriter|checkpointer|background writer/.test(cmdline)) return 'WAL and checkpoints';
  return 'backends';
}

/**
 * A process's /proc/<pid>/stat: its command name, and the fields after it (utime and stime are fields 14 and 15 of
 * the file, [11] and [12] here; cutime and cstime, what its children that ended used, [13] and [14]). Undefined once
 * it has exited.
 */
function procStat(pid: number): { comm: string; fields: string[] } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    return { comm: stat.slice(stat.indexOf('(') + 1, close), fields: stat.slice(close + 2).split(' ') };
  } catch {
    return undefined;
  }
}

/** The pids of every process now. */
function pids(): number[] {
  return readdirSync('/proc').map(Number).filter(Number.isInteger);
}

export function cpuSnapshot(names: Map<number, string>): CpuSnapshot {
  const snapshot: CpuSnapshot = new Map();
  for (const pid of pids()) {
    const kind = classify(pid, names);
    if (!kind) continue;
    const stat = procStat(pid);
    if (!stat) continue;
    // with cutime and cstime: Postgres' autovacuum workers and closed connections end during a scenario, and their
    // CPU was missing (a 10k graph's run kept both cores busy while the processes counted added up to 61 % of them)
    const { fields } = stat;
    snapshot.set(pid, { ...kind, ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]) });
  }
  return snapshot;
}

/** CPU milliseconds per group between two snapshots, and per unit of work when `units` is given. */
export function cpuSince(before: CpuSnapshot, after: CpuSnapshot, units = 1): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const [pid, { group, ticks }] of after) {
    const start = before.get(pid)?.ticks ?? 0;
    totals[group] = (totals[group] ?? 0) + ((ticks - start) * 1000) / TICKS_PER_SECOND;
  }
  // A process that ended in between: its parent's cutime now holds its whole life, of which `before` had counted
  // this much already.
  for (const [pid, { group, ticks }] of before) {
    if (!after.has(pid)) totals[group] = (totals[group] ?? 0) - (ticks * 1000) / TICKS_PER_SECOND;
  }
  return perUnit(totals, units);
}

/** Milliseconds by group as per unit, rounded, largest first, with their total. */
function perUnit(totals: Record<string, number>, units: number): Record<string, number> {
  const result: Record<string, number> = {};
  let sum = 0;
  for (const [group, ms] of Object.entries(totals).sort((a, b) => b[1] - a[1])) {
    result[group] = Math.round((ms / units) * 100) / 100;
    sum += ms;
  }
  result.total = Math.round((sum / units) * 100) / 100;
  return result;
}

/**
 * Watches Postgres' processes every 250 ms until stopped: the last CPU seen of each, by its role. A process that ends
 * between two snapshots (a connection closed, an autovacuum worker done) leaves only its parent's cutime; what the
 * watch saw of it says what it was. Reads only /proc/<pid>/stat of every process (and a new Postgres process's title
 * once): about a millisecond a look.
 */
export function watchPostgres(): { stop(): Map<number, { role: string; ticks: number }> } {
  const seen = new Map<number, { role: string; ticks: number }>();
  const look = () => {
    for (const pid of pids()) {
      const stat = procStat(pid);
      if (stat?.comm !== 'postgres') continue;
      const ticks = Number(stat.fields[11]) + Number(stat.fields[12]);
      const known = seen.get(pid);
      if (known) known.ticks = ticks;
      else {
        try {
          seen.set(pid, { role: postgresRole(cmdlineOf(pid)), ticks });
        } catch {
          // exited meanwhile
        }
      }
    }
  };
  look();
  const timer = setInterval(look, 250);
  return {
    stop() {
      clearInterval(timer);
      look();
      return seen;
    },
  };
}

/**
 * Postgres' CPU milliseconds per unit between two snapshots, by what its processes do (postgresRole). A process that
 * ended in between counts for its role with what `watched` last saw of it (watchPostgres); the rest of the
 * postmaster's cutime stays "ended (postmaster)".
 */
export function postgresCpuSince(before: CpuSnapshot, after: CpuSnapshot, units = 1, watched?: Map<number, { role: string; ticks: number }>): Record<string, number> {
  const only = (snapshot: CpuSnapshot) => {
    const out: CpuSnapshot = new Map();
    for (const [pid, p] of snapshot) if (p.group === 'postgres') out.set(pid, { ...p, group: p.role ?? 'backends' });
    return out;
  };
  const result = cpuSince(only(before), only(after), 1);
  delete result.total;
  for (const [pid, { role, ticks }] of watched ?? []) {
    if (after.has(pid) || role === 'ended (postmaster)') continue;
    // its whole life: the postmaster's cutime holds that much of it, and cpuSince already took off what `before` saw
    const ms = (ticks * 1000) / TICKS_PER_SECOND;
    result[role] = (result[role] ?? 0) + ms;
    result['ended (postmaster)'] = (result['ended (postmaster)'] ?? 0) - ms;
  }
  return perUnit(result, units);
}
