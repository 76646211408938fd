import { spawn, type ChildProcess } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { inNamespaceOf, type NetworkTools } from './network.js';

/**
 * Destinations an `internet` run's namespace routes to `prohibit` (connect fails at once with EACCES): this
 * network, RFC 1918's private ranges, the shared (CGNAT) range, link-local (cloud metadata at 169.254.169.254), the
 * IETF and documentation ranges, benchmarking, multicast and reserved, and each IPv4 address of the worker's own
 * interfaces (a service listening on 0.0.0.0 of the host would otherwise be one connect away). slirp4netns's own
 * 10.0.2.0/24 stays reachable through its more specific route (its DNS forwarder at 10.0.2.3); its gateway 10.0.2.2,
 * which leads to the host's loopback, is refused by slirp4netns itself (--disable-host-loopback). The namespace has
 * no IPv6 route (slirp4netns without --enable-ipv6).
 */
export const PROHIBITED_RANGES = [
  '0.0.0.0/8', '10.0.0.0/8', '100.64.0.0/10', '169.254.0.0/16', '172.16.0.0/12', '192.0.0.0/24', '192.168.0.0/16',
  '198.18.0.0/15', '224.0.0.0/4', '240.0.0.0/4',
];

/** The worker's own IPv4 addresses (besides loopback, which the namespace never reaches). */
export function hostAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a !== undefined && a.family === 'IPv4' && !a.internal)
    .map((a) => `${a!.address}/32`);
}

/** What the worker does between the namespace's creation and the command's start. */
export interface NetnsSetup {
  kind: 'internet' | 'low-port';
  tools: NetworkTools;
  /** the worker is not root: enter the sandbox's user namespace too (it owns the network namespace) */
  userNs: boolean;
}

/**
 * Waits for the sandbox to say its namespace exists (bwrap --info-fd's JSON with `child-pid`, or the user mode
 * prelude's `netns <pid>` line), sets it up from outside, then lets the sandbox go on (a byte on its block fd).
 * Resolves to slirp4netns's process (internet), to be killed when the run ends.
 */
export async function setUpNetns(child: ChildProcess, setup: NetnsSetup): Promise<ChildProcess | undefined> {
  const info = child.stdio[3] as Readable | null;
  const gate = child.stdio[4] as Writable | null;
  if (!info || !gate) throw new Error('the sandbox was started without its setup pipes');
  // the sandbox closes its ends once it goes on (a reset then is no fault)
  for (const pipe of [info, gate]) pipe.on('error', () => undefined);
  const pid = await new Promise<number>((resolve, reject) => {
    let text = '';
    const timer = setTimeout(() => reject(new Error('the sandbox did not report its network namespace within 10 s')), 10_000);
    info.on('data', (d: Buffer) => {
      text += d.toString('utf8');
      const m = /"child-pid":\s*(\d+)/.exec(text) ?? /^netns (\d+)$/m.exec(text);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    });
    info.once('error', reject);
    child.once('exit', () => reject(new Error('the sandbox exited before its network was set up')));
  });
  let slirp: ChildProcess | undefined;
  try {
    if (setup.kind === 'low-port') {
      // the root URL's port is below 1024: let the run's forwarder listen there (this namespace only)
      inNamespaceOf(setup.tools, pid, ['/bin/sh', '-c', 'echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start'], setup.userNs);
    } else {
      // bwrap brings the loopback up in its child after --info-fd, concurrently: configuring the namespace meanwhile
      // made bwrap's own netlink request fail now and then ("loopback: Failed RTM_NEWADDR")
      for (let i = 0; !/inet 127\.0\.0\.1/.test(inNamespaceOf(setup.tools, pid, [setup.tools.ip as string, '-o', 'addr', 'show', 'dev', 'lo'], setup.userNs)); i++) {
        if (i >= 100) throw new Error("the sandbox's loopback did not come up within 2 s");
        await new Promise((r) => setTimeout(r, 20));
      }
      slirp = await startSlirp(setup.tools, pid, setup.userNs);
      for (const range of [...PROHIBITED_RANGES, ...hostAddresses()]) {
        inNamespaceOf(setup.tools, pid, [setup.tools.ip as string, 'route', 'add', 'prohibit', range], setup.userNs);
      }
    }
  } catch (err) {
    slirp?.kill('SIGKILL');
    throw err;
  }
  gate.end('go\n');
  info.destroy();
  return slirp;
}

/**
 * slirp4netns on the namespace of `pid`: `--configure` gives it tap0 with 10.0.2.100 and a default route,
 * `--disable-host-loopback` refuses 10.0.2.2 (the host's 127.0.0.1), `--enable-sandbox` puts slirp4netns itself in a
 * mount namespace with its capabilities dropped. Resolves once it says the interface is up (its ready fd).
 */
async function startSlirp(tools: NetworkTools, pid: number, userNs: boolean): Promise<ChildProcess> {
  // by path: given a pid, slirp4netns 1.2 also joins that process's user namespace, and then (as root, with bwrap's
  // namespaces) may not enter the network namespace (setns EPERM); a root worker needs no user namespace to do so
  const args = ['--configure', '--mtu=65520', '--disable-host-loopback', '--enable-sandbox', '--ready-fd=3', ...(userNs ? [`--userns-path=/proc/${pid}/ns/user`] : []), '--netns-type=path', `/proc/${pid}/ns/net`, 'tap0'];
  const slirp = spawn(tools.slirp4netns as string, args, { stdio: ['ignore', 'ignore', 'pipe', 'pipe'], env: {} });
  let stderr = '';
  slirp.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-2000)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`slirp4netns did not bring the run's network up within 10 s: ${stderr.trim()}`)), 10_000);
    (slirp.stdio[3] as Readable).once('data', () => {
      clearTimeout(timer);
      resolve();
    });
    slirp.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`slirp4netns exited (${code}): ${stderr.trim()}`));
    });
    slirp.once('error', reject);
  });
  slirp.removeAllListeners('exit');
  return slirp;
}
