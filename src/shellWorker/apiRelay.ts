import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import path from 'node:path';
import type { ApiAddress } from './network.js';

/**
 * The `api` network mode's way out (Taskcluster's taskcluster-proxy model, as a plain forwarder): the worker listens
 * on a Unix socket, and each connection made to it is joined byte for byte to a new TCP connection to the API's root
 * URL host and port. Inside each run's network namespace a forwarder (FORWARDER_JS, started by the sandbox as the
 * run's uid) listens on 127.0.0.1 at the root URL's port and hands every connection to that socket: a pathname
 * socket is reached through the filesystem, whatever the network namespace, and leads to the API alone. TLS (an
 * https root URL) passes through end to end; nothing is added to what the task sends (no credentials: the worker
 * hands none to tasks).
 */
export interface ApiRelay {
  /** the Unix socket's path on the worker's side */
  socketPath: string;
  /** the directory holding it and the sandboxes' hosts file */
  dir: string;
  /** the /etc/hosts runs see in the `api` and `none` modes (loopback, and the API's name on it) */
  hostsPath: string;
  /** the /etc/resolv.conf runs see in the `internet` mode (slirp4netns's DNS forwarder) */
  resolvPath: string;
  close(): Promise<void>;
}

/** Where the socket appears inside a bwrap sandbox. */
export const SANDBOX_SOCKET = '/run/tgs/api.sock';

/**
 * Starts the worker's side of the relay in a directory of its own below `parent` (which runs' uids can enter), with
 * the hosts and resolv.conf files sandboxes see. Started whenever runs get a network namespace: a payload may narrow
 * `internet` to `api`.
 */
export async function startApiRelay(parent: string, api: ApiAddress, hosts: string): Promise<ApiRelay> {
  const dir = await mkdtemp(path.join(parent, 'tgs-net-'));
  // runs' uids connect to the socket and read the hosts file: the directory is searchable, not listable
  await chmod(dir, 0o711);
  const socketPath = path.join(dir, 'api.sock');
  const hostsPath = path.join(dir, 'hosts');
  await writeFile(hostsPath, hosts, { mode: 0o644 });
  const resolvPath = path.join(dir, 'resolv.conf');
  await writeFile(resolvPath, 'nameserver 10.0.2.3\n', { mode: 0o644 });
  const sockets = new Set<Socket>();
  const server: Server = createServer((inner) => {
    const outer = connect({ host: api.host, port: api.port });
    for (const s of [inner, outer]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
    }
    inner.pipe(outer);
    outer.pipe(inner);
    inner.once('error', () => outer.destroy());
    outer.once('error', () => inner.destroy());
    inner.once('close', () => outer.destroy());
    outer.once('close', () => inner.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  // any run's uid may connect: what it reaches is the API, which every run reaches
  await chmod(socketPath, 0o666);
  return {
    socketPath,
    dir,
    hostsPath,
    resolvPath,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The forwarder inside a run's namespace, for `node -e` (node is the one runtime every sandbox has): argv port, socket.
 * Prints `ready` and closes its stdout once it listens, so the sandbox's prelude (`r=$(node … &)`) waits exactly
 * until then; it then lives as long as the run's namespace.
 */
export const FORWARDER_JS = [
  "const net = require('net'), fs = require('fs');",
  'const [port, sock] = process.argv.slice(1);',
  // by hand rather than pipe(): pipe() looks at process.stdout, whose fd 1 is closed below
  "const join = (a, b) => { a.on('data', (d) => { if (!b.write(d)) a.pause(); }); b.on('drain', () => a.resume()); a.on('end', () => b.end()); };",
  'const server = net.createServer((c) => {',
  '  const u = net.connect(sock); join(c, u); join(u, c);',
  "  c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); c.on('close', () => u.destroy()); u.on('close', () => c.destroy());",
  '});',
  "server.listen(Number(port), '127.0.0.1', () => { fs.writeSync(1, 'ready\\n'); fs.closeSync(1); });",
].join('\n');

/**
 * The shell lines that start the forwarder (as `run`: nothing, or `setpriv …` to drop to the run's uid) and wait for
 * it; $TGS_NODE, $TGS_FWD, $TGS_API_PORT and $TGS_API_SOCK come from the prelude's positional parameters.
 */
export const START_FORWARDER = (run: string) =>
  `tgs_fwd() { r=$(${run} "$1" --max-old-space-size=16 -e "$TGS_FWD" "$TGS_API_PORT" "$TGS_API_SOCK" 2>/dev/null &); }; ` +
  // the worker's node can sit where the run's uid cannot reach it (Node 26 from ~/.cache under a 0700 /root: every run
  // of the examples failed with 125 on it): then the system's node on PATH serves
  'tgs_fwd "$TGS_NODE"; [ "$r" = ready ] || tgs_fwd node; ' +
  '[ "$r" = ready ] || { echo "tgs: the API forwarder could not start in the sandbox (node: $TGS_NODE, nor node on PATH)" >&2; exit 125; }';
