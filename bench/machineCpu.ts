import { readFileSync } from 'node:fs';

/**
 * The whole machine's CPU from /proc/stat (Linux): how many cores were busy over a phase, and how many sat idle
 * while a process waited on the disk (iowait: Postgres' WAL flushes at commit). A scenario's ratio of tasks/s to what
 * its CPU per task allows is the machine's busy share; this says which phase left cores idle and whether on I/O.
 */
export interface MachineSnapshot {
  at: number;
  busy: number;
  iowait: number;
  idle: number;
}

export function machineSnapshot(): MachineSnapshot {
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (USER_HZ ticks, summed over the cores)
  const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = fields;
  return { at: performance.now(), busy: user + nice + system + irq + softirq + (steal ?? 0), iowait, idle };
}

/** Cores busy, in iowait and idle on average between two snapshots (they add up to the machine's cores). */
export function coresBetween(a: MachineSnapshot, b: MachineSnapshot): { busy: number; iowait: number; idle: number } {
  const seconds = (b.at - a.at) / 1000;
  const cores = (ticks: number) => Math.round((ticks / 100 / seconds) * 100) / 100;
  return { busy: cores(b.busy - a.busy), iowait: cores(b.iowait - a.iowait), idle: cores(b.idle - a.idle) };
}

/** The machine's busy CPU milliseconds between two snapshots: the processes the bench names, and the rest (the kernel's softirqs, other services). */
export const busyMsBetween = (a: MachineSnapshot, b: MachineSnapshot) => ((b.busy - a.busy) * 1000) / 100;
