// Who holds a port, for `tgs dev`'s "port 8080 is taken (pid 1234: node …)".
import { readdirSync, readFileSync } from 'node:fs';
import { listeningInodes, readlinkSafe } from '../temporal/devServer.js';

/**
 * ` (pid 1234: tgs dev --data-dir …)` for the process listening on `port`, or '' when it cannot be known: no /proc,
 * or a process of another user (its fds are not readable). Reads every process's fds: tens of ms, once per taken port.
 */
export function portHolder(port: number): string {
  try {
    const inodes = listeningInodes(port);
    if (inodes.size === 0) return '';
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      let fds: string[];
      try {
        fds = readdirSync(`/proc/${pid}/fd`);
      } catch {
        continue;
      }
      for (const fd of fds) {
        const target = readlinkSafe(`/proc/${pid}/fd/${fd}`);
        if (!target?.startsWith('socket:[') || !inodes.has(target.slice('socket:['.length, -1))) continue;
        const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
        return ` (pid ${pid}: ${args.length > 100 ? `${args.slice(0, 99)}…` : args})`;
      }
    }
  } catch {
    // no /proc: say nothing of who
  }
  return '';
}
