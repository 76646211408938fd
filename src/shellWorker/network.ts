import { spawnSync } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';

/**
 * What a run's commands can reach over the network (`tgs shell-worker --network`):
 *  - `none`: a network namespace of its own with only a loopback interface: nothing outside the run.
 *  - `api`: the same, plus the tgs API at its root URL's host and port (apiRelay.ts forwards that one address out of
 *    the namespace, as Taskcluster's taskcluster-proxy gives a task one local address), nothing else: not Postgres,
 *    RabbitMQ, Temporal, the metrics port or another machine. The default.
 *  - `internet`: a user-mode TCP/IP stack (slirp4netns) with the host's loopback refused and the private, shared,
 *    link-local and multicast ranges routed to `prohibit` inside the namespace (internetAccess.ts).
 *  - `host`: the worker's own network; every service the worker reaches, the run reaches. Unsafe, asked for by name.
 */
export type NetworkMode = 'none' | 'api' | 'internet' | 'host';
export const NETWORK_MODES: readonly NetworkMode[] = ['none', 'api', 'internet', 'host'];

/** From the narrowest to the widest: a payload may ask for a mode at most as wide as the worker's. */
const WIDTH: Record<NetworkMode, number> = { none: 0, api: 1, internet: 2, host: 3 };

export const NETWORK_UNSAFE_LINE =
  "unsafe: tasks share the worker's network and reach every service it reaches, Postgres, RabbitMQ and Temporal included (--network host)";

/** The tools each mode needs outside bwrap's own namespaces, and the Debian package that has each. */
const PACKAGES: Record<string, string> = { unshare: 'util-linux', setpriv: 'util-linux', nsenter: 'util-linux', ip: 'iproute2', slirp4netns: 'slirp4netns' };

/** An executable named `name` on PATH (or in the sbin directories root's PATH may lack). */
export function findTool(name: string, pathEnv: string | undefined = process.env.PATH): string | undefined {
  const dirs = [...(pathEnv ?? '').split(path.delimiter), '/usr/sbin', '/sbin', '/usr/bin', '/bin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The tools found on this machine, by name. */
export type NetworkTools = Partial<Record<'unshare' | 'setpriv' | 'nsenter' | 'ip' | 'slirp4netns', string>>;

export function findNetworkTools(pathEnv?: string): NetworkTools {
  const tools: NetworkTools = {};
  for (const name of ['unshare', 'setpriv', 'nsenter', 'ip', 'slirp4netns'] as const) {
    const found = findTool(name, pathEnv);
    if (found) tools[name] = found;
  }
  return tools;
}

/** What decides the network mode: the isolation mode, the worker's uid and the tools at hand. */
export interface NetworkFacts {
  isolation: 'bwrap' | 'user' | 'none';
  root: boolean;
  tools: NetworkTools;
  /** outside bwrap: why `unshare --net` failed when tried at start (a container without CAP_SYS_ADMIN), if it did */
  unshareFails?: string;
}

/** Tries `unshare --net --mount` once (outside bwrap, as root): undefined when it works, else what it said. */
export function probeUnshare(tools: NetworkTools): string | undefined {
  if (!tools.unshare) return undefined;
  const r = spawnSync(tools.unshare, ['--net', '--mount', '--', '/bin/true'], { encoding: 'utf8', timeout: 10_000, env: {} });
  return r.status === 0 ? undefined : (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n')[0];
}

export interface NetworkChoice {
  mode: NetworkMode;
  why: string;
}

/** The tools `mode` needs with this isolation and identity, or undefined when it needs root and the worker is not. */
function needs(mode: NetworkMode, facts: NetworkFacts): (keyof NetworkTools)[] | undefined {
  if (mode === 'host') return [];
  const inBwrap = facts.isolation === 'bwrap';
  // outside bwrap a network namespace is made by the root worker itself (unshare), which then drops to the run's uid
  if (!inBwrap && !facts.root) return undefined;
  const base: (keyof NetworkTools)[] = inBwrap ? [] : ['unshare', 'setpriv', 'ip'];
  if (mode === 'internet') return [...base, 'slirp4netns', 'nsenter', ...(inBwrap ? (['ip'] as const) : [])];
  return base;
}

/** Why `mode` cannot be given here, as one line with the fix; undefined when it can. */
export function networkUnavailable(mode: NetworkMode, facts: NetworkFacts): string | undefined {
  const needed = needs(mode, facts);
  if (needed === undefined) {
    return `--network ${mode}: a network namespace of its own outside bubblewrap needs a root worker, and this worker is not root with --isolation ${facts.isolation}: use --isolation bwrap (apt-get install bubblewrap), start the worker as root, or pass --network host (unsafe)`;
  }
  const missing = needed.filter((tool) => !facts.tools[tool]);
  if (missing.length === 0) {
    if (facts.isolation === 'bwrap' || !facts.unshareFails) return undefined;
    return `--network ${mode}: this worker cannot make a network namespace (${facts.unshareFails}): give its container CAP_SYS_ADMIN, use --isolation bwrap, or pass --network host where the deployment fences the worker's network (as docker-compose.yml and the Helm chart do)`;
  }
  const packages = [...new Set(missing.map((tool) => PACKAGES[tool]))];
  return `--network ${mode}: ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing on this machine: apt-get install ${packages.join(' ')} (or choose another --network mode)`;
}

/**
 * The mode to run with: the one asked for, or `api` (the default in every isolation mode). Asked for a mode the
 * machine cannot give, it throws the one line with the fix; `fallbackToHost` (tgs dev on a machine without root or
 * bwrap) takes `host` instead of refusing, as `fallbackToNone` does for the isolation.
 */
export function chooseNetwork(requested: NetworkMode | undefined, facts: NetworkFacts, options: { fallbackToHost?: boolean } = {}): NetworkChoice {
  if (requested !== undefined && !NETWORK_MODES.includes(requested)) throw new Error(`--network ${JSON.stringify(requested)}: give api, internet, none or host`);
  if (requested !== undefined) {
    const why = networkUnavailable(requested, facts);
    if (why) throw new Error(why);
    return { mode: requested, why: 'asked for' };
  }
  const why = networkUnavailable('api', facts);
  if (!why) return { mode: 'api', why: 'the default' };
  if (options.fallbackToHost) return { mode: 'host', why: `nothing narrower here: ${why}` };
  throw new Error(`${why.replace('--network api: ', 'the default --network api cannot be given: ')}`);
}

/** The mode a run gets: the payload's `network` may narrow the worker's, never widen it. */
export function narrowNetwork(worker: NetworkMode, asked: NetworkMode | undefined): { mode: NetworkMode } | { error: string } {
  if (asked === undefined) return { mode: worker };
  if (WIDTH[asked] <= WIDTH[worker]) return { mode: asked };
  return { error: `payload.network ${JSON.stringify(asked)} is wider than this worker gives (--network ${worker}): a payload may only narrow the network (${NETWORK_MODES.filter((m) => WIDTH[m] <= WIDTH[worker]).join(', ')})` };
}

/** Where the API is, as a task's commands name it (its root URL's host and port). */
export interface ApiAddress {
  host: string;
  port: number;
  /** the host is a name (not an address): the sandbox's /etc/hosts maps it to 127.0.0.1 */
  named: boolean;
}

const LOOPBACK = (host: string) => host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(host);

/**
 * The root URL's host and port, which the `api` mode serves at 127.0.0.1 inside the run's namespace: the URL in the
 * task's environment stays the same, so Hawk signatures (which cover host and port) still match what the API expects.
 * A root URL on an address other than loopback cannot be served there (the namespace cannot hold that address
 * without privileges inside it): name it instead.
 */
export function apiAddress(rootUrl: string): ApiAddress {
  const url = new URL(rootUrl);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
  if (isIP(host) && !LOOPBACK(host)) {
    throw new Error(
      `--network api: the API's root URL ${rootUrl} is an address (${host}) that a run's network namespace cannot hold; give TGS_ROOT_URL with a host name (e.g. one in /etc/hosts) or a loopback address, or choose --network internet`,
    );
  }
  return { host, port, named: !isIP(host) && host !== 'localhost' };
}

/** The sandbox's /etc/hosts in the `api` and `none` modes: loopback, and the API's name on it. */
export function sandboxHosts(api: ApiAddress | undefined): string {
  return ['127.0.0.1\tlocalhost', '::1\tlocalhost ip6-localhost ip6-loopback', ...(api?.named ? [`127.0.0.1\t${api.host}`] : []), ''].join('\n');
}

/** Whether the sysctl that lets an unprivileged process listen below 1024 must be lowered inside the namespace. */
export const needsLowPort = (api: ApiAddress | undefined) => api !== undefined && api.port < 1024;

/** Runs `nsenter` into the namespaces of `pid` (as root) with `args`; answers its stdout, throws its stderr. */
export function inNamespaceOf(tools: NetworkTools, pid: number, args: string[], userNs: boolean): string {
  const r = spawnSync(tools.nsenter as string, [`--target=${pid}`, '--net', ...(userNs ? ['--user', '--preserve-credentials'] : []), '--', ...args], { encoding: 'utf8', timeout: 10_000, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } });
  if (r.status !== 0) throw new Error(`${args.join(' ')} in the run's network namespace failed: ${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}`);
  return r.stdout;
}
