import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { accessSync, constants, lstatSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { chown, mkdir, mkdtemp, realpath } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { FORWARDER_JS, SANDBOX_SOCKET, START_FORWARDER, type ApiRelay } from './apiRelay.js';
import { needsLowPort, type ApiAddress, type NetworkMode, type NetworkTools } from './network.js';
import { setUpNetns, type NetnsSetup } from './runNetwork.js';
import { allocatedBytes, createRunCgroup, fmtBytes, rlimitArgs, type CgroupPlan, type RunCgroup, type RunLimits } from './limits.js';
import { killEveryProcessOf, type UidPool } from './runUids.js';
import { removeTaskDir } from './taskDir.js';
import type { TaskUser } from './taskUser.js';

/**
 * How the shell worker keeps one run from another and from itself (`tgs shell-worker --isolation`):
 *  - `bwrap`: bubblewrap; each run in its own user, PID, IPC, UTS and cgroup namespaces, with a private /tmp and a
 *    read-only view of the system. When the command exits, bwrap's pid 1 exits and the kernel kills every process
 *    left in the namespace. A root worker also runs each sandbox as a fresh uid.
 *  - `user`: a fresh uid and gid per run (root only, no bwrap); every process of that uid is killed when it ends.
 *  - `none`: the worker's own identity; only the command's process group is killed. Unsafe, asked for by name.
 */
export type IsolationMode = 'bwrap' | 'user' | 'none';
export const ISOLATION_MODES: readonly IsolationMode[] = ['bwrap', 'user', 'none'];

export const UNSAFE_LINE = "unsafe: tasks share the worker's identity and can read its credentials (--isolation none)";
export const BWRAP_INSTALL_HINT = 'apt-get install bubblewrap';

/** What `bwrap` works out to on this machine. */
export type BwrapProbe = { ok: true; path: string } | { ok: false; why: string };

/** What decides the mode: the worker's uid and whether bwrap works here. */
export interface MachineFacts {
  uid: number | undefined;
  bwrap: BwrapProbe;
}

export interface IsolationChoice {
  mode: IsolationMode;
  /** why this mode, for the start line */
  why: string;
}

/**
 * The mode to run with: the one asked for, or the strongest the machine gives (bwrap, else `user` as root). Asked for
 * a mode the machine cannot give, or given nothing usable, it throws saying what to install or which flag to use;
 * `fallbackToNone` (tgs dev on a fresh machine) takes `none` instead of refusing.
 */
export function chooseIsolation(requested: IsolationMode | undefined, facts: MachineFacts, options: { fallbackToNone?: boolean } = {}): IsolationChoice {
  const root = facts.uid === 0;
  const bwrapWhy = facts.bwrap.ok ? '' : facts.bwrap.why;
  if (requested !== undefined && !ISOLATION_MODES.includes(requested)) {
    throw new Error(`--isolation ${JSON.stringify(requested)}: give bwrap, user or none`);
  }
  if (requested === 'bwrap') {
    if (!facts.bwrap.ok) {
      throw new Error(
        `--isolation bwrap: bubblewrap cannot run sandboxes here: ${bwrapWhy}. Install it (${BWRAP_INSTALL_HINT}) and make sure unprivileged user namespaces are enabled, ` +
          `or choose ${root ? '--isolation user (a fresh uid per run, no bwrap needed)' : '--isolation user as root'} or --isolation none (unsafe).`,
      );
    }
    return { mode: 'bwrap', why: 'asked for' };
  }
  if (requested === 'user') {
    if (!root) throw new Error(`--isolation user: giving every run its own uid needs root, and this worker runs as ${facts.uid === undefined ? 'a platform without uids' : `uid ${facts.uid}`}. Start the worker as root, or use --isolation bwrap (${BWRAP_INSTALL_HINT}).`);
    return { mode: 'user', why: 'asked for' };
  }
  if (requested === 'none') return { mode: 'none', why: 'asked for' };
  if (facts.bwrap.ok) return { mode: 'bwrap', why: 'the strongest this machine gives' };
  if (root) return { mode: 'user', why: `the strongest this machine gives: bubblewrap cannot run here (${bwrapWhy}; ${BWRAP_INSTALL_HINT} gives the stronger bwrap mode)` };
  if (options.fallbackToNone) return { mode: 'none', why: `nothing stronger here: bubblewrap cannot run (${bwrapWhy}; ${BWRAP_INSTALL_HINT}) and this process is not root` };
  throw new Error(
    `no task sandbox is available: bubblewrap cannot run here (${bwrapWhy}) and this worker is not root (uid ${facts.uid}). ` +
      `Install bubblewrap (${BWRAP_INSTALL_HINT}), or start the worker as root (--isolation user), or pass --isolation none to run tasks unsandboxed (${UNSAFE_LINE}).`,
  );
}

/** `bwrap` on PATH (or the path given). */
export function findBwrap(pathEnv: string | undefined = process.env.PATH): string | undefined {
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, 'bwrap');
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Top-level system directories the sandbox shows read-only (symlinks on merged-/usr systems stay symlinks). */
const SYSTEM_DIRS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/**
 * The /etc entries programs need: accounts and groups (names for `id`, `ls -l`), name resolution, TLS roots, time
 * zone, the dynamic linker's cache, Debian's alternatives (/usr/bin/awk and others point there). Not shown: everything
 * else in /etc (shadow, ssh keys, the deployment's configuration and credentials).
 */
const ETC_ENTRIES = [
  'passwd', 'group', 'hosts', 'host.conf', 'resolv.conf', 'nsswitch.conf', 'gai.conf', 'services', 'protocols',
  'ssl', 'ca-certificates', 'ca-certificates.conf', 'pki', 'localtime', 'timezone', 'ld.so.cache', 'ld.so.conf',
  'ld.so.conf.d', 'alternatives', 'mime.types', 'os-release', 'debian_version', 'gitconfig',
];

/** The directories bound read-only as a whole: a path below one of them needs no bind of its own. */
const covered = (p: string) => ['/usr', ...SYSTEM_DIRS].some((d) => p === d || p.startsWith(`${d}/`));

/** The first directory on the way to `dir` (itself included) that a user other than its owner and group cannot enter. */
export function firstClosedDir(dir: string): { dir: string; mode: number } | undefined {
  let p = path.resolve(dir);
  const chain: string[] = [];
  for (;;) {
    chain.unshift(p);
    const up = path.dirname(p);
    if (up === p) break;
    p = up;
  }
  for (const d of chain) {
    const mode = statSync(d).mode & 0o777;
    if ((mode & 0o001) === 0) return { dir: d, mode };
  }
  return undefined;
}

/**
 * bwrap's arguments for the system view. `nodeDir`: the node binary's directory when the system directories do not
 * hold it (a Node under /opt or a home directory), bound read-only so `node` keeps working in tasks.
 */
function systemViewArgs(nodeDir: string | undefined, tmpBytes?: number): string[] {
  const args = [
    '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try',
    // nested user namespaces are kernel attack surface a build does not need
    '--disable-userns',
    '--die-with-parent', '--new-session',
    '--ro-bind', '/usr', '/usr',
  ];
  for (const dir of SYSTEM_DIRS) {
    try {
      const st = lstatSync(dir);
      if (st.isSymbolicLink()) args.push('--symlink', readlinkSync(dir), dir);
      else if (st.isDirectory()) args.push('--ro-bind', dir, dir);
    } catch {
      // not on this system
    }
  }
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  // bwrap's tmpfs is otherwise half the host's RAM, for every run
  const size = tmpBytes === undefined ? [] : ['--size', String(tmpBytes)];
  args.push('--symlink', '/proc/self/mounts', '/etc/mtab', '--proc', '/proc', '--dev', '/dev', ...size, '--tmpfs', '/tmp', ...size, '--tmpfs', '/var/tmp');
  if (nodeDir) args.push('--ro-bind', nodeDir, nodeDir);
  return args;
}

/**
 * The node binary's directory when the system view does not show it already and the sandbox's identity can reach it
 * (`otherUid`: a uid that is not the worker's, which needs every directory on the way open to others). Unreachable,
 * tasks get the system's `node` on PATH, if any.
 */
function nodeDirToBind(otherUid: boolean): string | undefined {
  const dir = path.dirname(process.execPath);
  if (covered(dir)) return undefined;
  return otherUid && firstClosedDir(dir) ? undefined : dir;
}

/**
 * Whether bwrap can run a sandbox here, tried once at start with the arguments of a real run (as `as`, the uid runs
 * get, when the worker is root): a missing binary, disabled user namespaces or a container that forbids mounting
 * /proc all show up here rather than in the first task.
 */
export function probeBwrap(options: { bwrapPath?: string; as?: { uid: number; gid: number } } = {}): BwrapProbe {
  const bwrap = options.bwrapPath ?? findBwrap();
  if (!bwrap) return { ok: false, why: `bwrap was not found on PATH (${process.env.PATH ?? ''})` };
  try {
    const r = spawnSync(bwrap, [...systemViewArgs(nodeDirToBind(options.as !== undefined)), '--', '/bin/sh', '-c', 'test -d /proc/self && test -x /bin/sh'], {
      encoding: 'utf8',
      env: {},
      cwd: '/',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(options.as ?? {}),
    });
    if (r.error) return { ok: false, why: `${bwrap} could not be started: ${r.error.message}` };
    if (r.status !== 0) {
      const said = r.stderr.trim().split('\n')[0] || `exit ${r.status ?? r.signal}`;
      return { ok: false, why: `${bwrap} failed (${said}); are unprivileged user namespaces disabled (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces)?` };
    }
    return { ok: true, path: bwrap };
  } catch (err) {
    return { ok: false, why: `${bwrap} could not be tried: ${(err as Error).message}` };
  }
}

/** One run's sandbox: its directory, its identity, how its command starts, and its end. */
export interface RunSandbox {
  /** the task's directory (its real path, created for this run) */
  dir: string;
  /** its TMPDIR */
  tmpDir: string;
  /** USER/LOGNAME of the run */
  userName: string;
  /** for the live log: who the command runs as, in what */
  describe: string;
  /** the uid the run's files belong to (its own, --task-user's, or the worker's) */
  uid: number | undefined;
  /** the run's network mode (the worker's, or narrower as its payload asked) */
  network: NetworkMode;
  /**
   * Starts the command. The sandbox's network is set up between the namespace's creation and the command's start;
   * when that fails, `note` gets the reason and the command is killed before it ran (it then exits 125 or by SIGKILL).
   */
  spawn(file: string, args: string[], env: Record<string, string>, note: (line: string) => void): ChildProcess;
  /** Kills the command now (maxRunTime, shutdown, lost claim); end() still follows. */
  kill(): void;
  /**
   * Asks the command to stop (a cancel): SIGTERM to its process group (with bwrap, the sandbox's group inside it),
   * nothing else of the machine's. The caller sends kill() after its grace if the command is still there.
   */
  terminate(): void;
  /** After the command exited: kills everything the run started and resolves when none of it is left. */
  end(): Promise<void>;
  /** After the command ended: what the run's bounds refused it (limits.ts), for its log. */
  bounds(): Promise<string[]>;
  /** After end(): removes the directory (never following what the task left in it) and frees the run's uid. */
  remove(): Promise<void>;
}

export interface SandboxConfig {
  mode: IsolationMode;
  /** the bwrap binary (mode bwrap) */
  bwrapPath?: string;
  /** per-run uids (mode user; mode bwrap when the worker is root and no taskUser is given) */
  uids?: UidPool;
  /** --task-user: the identity outside the namespaces (bwrap), or of every task (none) */
  taskUser?: TaskUser;
  /** parent of the task directories */
  workDir?: string;
  /** the widest network a run gets (`--network`); a payload may narrow it */
  network: NetworkMode;
  /** unshare, setpriv, nsenter, ip, slirp4netns, mount as found at start (network.ts) */
  tools: NetworkTools;
  /** the API's address as tasks name it, and the worker's side of the relay to it (modes api and internet) */
  api?: ApiAddress;
  relay?: ApiRelay;
  /** what one run may use */
  limits: RunLimits;
  /** where runs' cgroups go (none: memory, CPU and the pids controller's bound are not applied) */
  cgroups?: CgroupPlan;
  /** prlimit, which sets the runs' rlimits (missing: none are set) */
  prlimit?: string;
}

/** The start line's words on the network. */
const NETWORK_LINES: Record<NetworkMode, (api: ApiAddress | undefined) => string> = {
  none: () => 'network none: a namespace of its own with only loopback',
  api: (api) => `network api: a namespace of its own reaching only the API (${api?.host}:${api?.port} inside, relayed through a Unix socket)`,
  internet: () => "network internet: a namespace of its own behind slirp4netns, without the host's loopback, private ranges or the host's addresses",
  host: () => "network host: the worker's own, shared",
};

/** A shell word holding `s` as it is. */
export const shq = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;

/** The node binary a sandbox's forwarder runs: this worker's when the run's identity can reach it, else `node` on PATH. */
function forwarderNode(otherUid: boolean): string {
  const dir = path.dirname(process.execPath);
  return otherUid && !covered(dir) && firstClosedDir(dir) ? 'node' : process.execPath;
}

/** Kills a process and its process group (a process that left the group survives this: that is mode none's weakness). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}

/**
 * The children of `pid` (the kernel's list; without it, /proc's stat of every process). Only the worker's own child
 * is asked about: its children are what it forked (bwrap's sandbox init), nothing a task can place there.
 */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    const found: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        // the fields after the command's name, which is in parentheses and may hold anything
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
    return found;
  }
}

/** SIGTERM to a process group; false when there is none (already gone). */
function termGroup(pgid: number): boolean {
  try {
    process.kill(-pgid, 'SIGTERM');
    return true;
  } catch {
    return false;
  }
}

/** Makes each run's sandbox in the configured mode. */
export class Sandbox {
  constructor(readonly config: SandboxConfig) {
    if (config.mode === 'user' && !config.uids) throw new Error('isolation user needs a uid range');
    if (config.mode === 'bwrap' && !config.bwrapPath) throw new Error('isolation bwrap needs the bwrap binary');
    // a run's own uid (or --task-user) is nobody the directories on the way know: each must be open to others
    if (config.uids || config.taskUser) {
      const workDir = config.workDir ?? tmpdir();
      const closed = firstClosedDir(workDir);
      if (closed) {
        throw new Error(
          `--work-dir ${workDir}: the runs' uids cannot enter ${closed.dir} (mode ${closed.mode.toString(8).padStart(4, '0')}). ` +
            `Open it to others (chmod o+x ${closed.dir}) or choose a --work-dir every user can enter (the default, ${tmpdir()}, is).`,
        );
      }
    }
  }

  /** The worker's start line: what separates runs here and what does not. */
  describe(): string {
    const { mode, uids, taskUser } = this.config;
    const range = uids ? `${uids.range.first}-${uids.range.last}` : '';
    const net = NETWORK_LINES[this.config.network](this.config.api);
    if (mode === 'bwrap') {
      const who = taskUser ? `as ${taskUser.name} (uid ${taskUser.uid}) outside` : uids ? `as a fresh uid from ${range}` : `as this worker's uid ${process.getuid?.()} inside namespaces of its own`;
      return `each run in its own user, PID, IPC, UTS and cgroup namespaces (bubblewrap) ${who}, with a private /tmp and a read-only view of the system; nothing it starts outlives it; ${net}`;
    }
    if (mode === 'user') return `each run as a fresh uid and gid from ${range}, its directory 0700 and TMPDIR inside it; every process of that uid is killed when the run ends; /tmp is shared; ${net}`;
    return `${taskUser ? `tasks run as ${taskUser.name} (uid ${taskUser.uid})` : "tasks run as this worker's user"}, share its /tmp, and what leaves the command's process group outlives the run; ${net}`;
  }

  async prepare(taskId: string, runId: number, network: NetworkMode = this.config.network): Promise<RunSandbox> {
    const { mode, uids, taskUser } = this.config;
    const perRunUid = mode === 'user' || (mode === 'bwrap' && uids !== undefined && !taskUser) ? await (uids as UidPool).acquire() : undefined;
    const identity = perRunUid !== undefined ? { uid: perRunUid, gid: perRunUid, name: `tgs-run-${perRunUid}` } : taskUser;
    try {
      const dir = await realpath(await mkdtemp(path.join(this.config.workDir ?? tmpdir(), `tgs-task-${taskId}-${runId}-`)));
      const tmpDir = mode === 'bwrap' ? '/tmp' : path.join(dir, '.tmp');
      if (mode !== 'bwrap') await mkdir(tmpDir, { mode: 0o700 });
      if (identity) {
        await chown(dir, identity.uid, identity.gid);
        if (mode !== 'bwrap') await chown(tmpDir, identity.uid, identity.gid);
      }
      const cgroup = this.config.cgroups ? await createRunCgroup(this.config.cgroups, `tgs-run-${taskId}-${runId}-${path.basename(dir).slice(-6)}`, this.config.limits) : undefined;
      return this.runSandbox(dir, tmpDir, identity, perRunUid, network, cgroup);
    } catch (err) {
      if (perRunUid !== undefined) uids?.release(perRunUid);
      throw err;
    }
  }

  /**
   * The program and arguments that run `file args` in this run's network (`host`: as they are), and what the worker
   * does between the namespace's creation and the command's start (none, or setUpNetns's).
   *  - bwrap: --unshare-net (bwrap brings the loopback up); `api` and `none` see an /etc/hosts of loopback and the
   *    API's name, `internet` a resolv.conf naming slirp4netns's DNS; `api` has the relay's socket at /run/tgs and a
   *    prelude inside that starts the forwarder (as the sandbox's uid) and waits for it before the command.
   *  - user, none (a root worker): unshare --net --mount runs a prelude as root inside the new namespaces (loopback
   *    up, the hosts or resolv.conf bound over /etc's, the forwarder started as the run's uid), which then drops to
   *    the run's uid with setpriv and runs the command.
   */
  private networked(file: string, args: string[], identity: { uid: number; gid: number } | undefined, network: NetworkMode): { argv: string[]; setup?: NetnsSetup } {
    const { mode, tools, api, relay } = this.config;
    const root = process.getuid?.() === 0;
    if (network === 'host') return { argv: mode === 'bwrap' ? ['--', file, ...args] : [file, ...args] };
    if (!relay) throw new Error(`network ${network} needs the worker's network directory (apiRelay.ts), which it did not make`);
    const r = relay as ApiRelay;
    const forwarderVars = (sock: string) =>
      `TGS_NODE=${shq(forwarderNode(identity !== undefined))}; TGS_FWD=${shq(FORWARDER_JS)}; TGS_API_PORT=${shq(String(api?.port))}; TGS_API_SOCK=${shq(sock)}`;
    const internetSetup: NetnsSetup = { kind: 'internet', tools, userNs: !root };
    if (mode === 'bwrap') {
      const bw: string[] = ['--unshare-net'];
      if (network === 'internet') bw.push('--ro-bind', r.resolvPath, '/etc/resolv.conf');
      else bw.push('--ro-bind', r.hostsPath, '/etc/hosts');
      if (network === 'api') bw.push('--ro-bind', r.dir, path.dirname(SANDBOX_SOCKET));
      const setup = network === 'internet' ? internetSetup : network === 'api' && needsLowPort(api) ? { kind: 'low-port' as const, tools, userNs: !root } : undefined;
      if (setup) bw.push('--info-fd', '3', '--block-fd', '4');
      const prelude = [...(setup ? ['exec 3>&- 4<&-'] : []), ...(network === 'api' ? [forwarderVars(SANDBOX_SOCKET), START_FORWARDER('')] : []), 'exec "$@"'].join('\n');
      return { argv: [...bw, '--', '/bin/sh', '-c', prelude, 'sh', file, ...args], setup };
    }
    const drop = identity ? `${shq(tools.setpriv as string)} --reuid=${identity.uid} --regid=${identity.gid} --clear-groups --` : '';
    const prelude = [
      `${shq(tools.ip as string)} link set lo up || exit 125`,
      network === 'internet'
        ? `mount --bind ${shq(r.resolvPath)} /etc/resolv.conf || exit 125`
        : `mount --bind ${shq(r.hostsPath)} /etc/hosts || exit 125`,
      ...(network === 'api' && needsLowPort(api) ? ['echo 0 > /proc/sys/net/ipv4/ip_unprivileged_port_start || exit 125'] : []),
      ...(network === 'internet' ? ['echo "netns $$" >&3', 'read _ <&4 || exit 125', 'exec 3>&- 4<&-'] : []),
      ...(network === 'api' ? [forwarderVars(r.socketPath), START_FORWARDER(drop)] : []),
      `exec ${drop} "$@"`,
    ].join('\n');
    return { argv: [tools.unshare as string, '--net', '--mount', '--', '/bin/sh', '-c', prelude, 'sh', file, ...args], setup: network === 'internet' ? internetSetup : undefined };
  }

  private runSandbox(dir: string, tmpDir: string, identity: { uid: number; gid: number; name: string } | undefined, perRunUid: number | undefined, network: NetworkMode, cgroup: RunCgroup | undefined): RunSandbox {
    const { mode, bwrapPath, uids, limits, prlimit } = this.config;
    let child: ChildProcess | undefined;
    let slirp: ChildProcess | undefined;
    let watchdog: NodeJS.Timeout | undefined;
    let overDisk: string | undefined;
    // a uid goes back to the pool only once none of its processes is left
    let allDead = perRunUid === undefined;
    const userName = identity?.name ?? userInfo().username;
    const killAll = async () => {
      clearInterval(watchdog);
      if (child) killGroup(child);
      slirp?.kill('SIGKILL');
      // a uid of this run alone: every process of it goes, in whatever session or namespace it hid
      if (perRunUid !== undefined) await killEveryProcessOf(perRunUid, perRunUid);
      allDead = true;
    };
    const who = identity ? `${identity.name} (uid ${identity.uid})` : `${userName} (uid ${process.getuid?.()}, the worker's own)`;
    const net = `network ${network}`;
    return {
      dir,
      tmpDir,
      userName,
      network,
      uid: identity?.uid ?? process.getuid?.(),
      describe: mode === 'bwrap' ? `sandbox bwrap as ${who}, ${net}` : mode === 'user' ? `sandbox user: runs as ${who}, ${net}` : `no sandbox (--isolation none): runs as ${who}, ${net}`,
      spawn: (file, args, env, note) => {
        // outside bwrap a network namespace is made as root, which the prelude then drops (setpriv)
        const netRoot = mode !== 'bwrap' && network !== 'host';
        const { argv, setup } = this.networked(file, args, netRoot ? identity : undefined, network);
        const [program, ...programArgs] = mode === 'bwrap'
          // the task directory at its own path, so TASK_WORKDIR and the paths in its log mean the same inside and out
          ? [bwrapPath as string, ...systemViewArgs(nodeDirToBind(identity !== undefined), limits.tmpBytes), '--bind', dir, dir, '--chdir', dir, ...argv]
          : argv;
        // the wrapper waits until the worker has put it in the run's cgroup (nothing of the run exists outside it),
        // sets the run's rlimits and becomes the program
        const rlimits = prlimit ? [prlimit, ...rlimitArgs(limits, perRunUid !== undefined, this.config.cgroups?.parents.pids !== undefined), '--'] : [];
        child = spawn('/bin/sh', ['-c', 'read _ || exit 125; exec "$@" </dev/null', 'sh', ...rlimits, program, ...programArgs], {
          cwd: mode === 'bwrap' ? '/' : dir,
          env,
          stdio: ['pipe', 'pipe', 'pipe', ...(setup ? (['pipe', 'pipe'] as const) : [])],
          detached: true,
          // libuv also drops the worker's supplementary groups when it switches user
          ...(identity && !netRoot ? { uid: identity.uid, gid: identity.gid } : {}),
        });
        const wrapper = child;
        wrapper.stdin?.on('error', () => undefined);
        void (async () => {
          if (wrapper.pid !== undefined) await cgroup?.add(wrapper.pid);
          wrapper.stdin?.end('go\n');
        })().catch((err: unknown) => {
          note(`could not put the run in its cgroup: ${(err as Error).message}; killed the command before it ran`);
          killGroup(wrapper);
        });
        watchdog = setInterval(() => {
          void allocatedBytes(dir, limits.taskDirBytes).then((used) => {
            if (used <= limits.taskDirBytes || overDisk) return;
            overDisk = `the run's directory holds more than its bound of ${fmtBytes(limits.taskDirBytes)} (--max-task-dir): killed the command`;
            note(overDisk);
            killGroup(wrapper);
          });
        }, 1000);
        if (setup) {
          const started = child;
          setUpNetns(started, setup).then(
            (s) => {
              slirp = s;
            },
            (err: unknown) => {
              note(`could not set up the run's network (${network}): ${(err as Error).message}; killed the command before it ran`);
              killGroup(started);
            },
          );
        }
        return child;
      },
      kill: () => {
        // bwrap: its sandbox dies with it (--die-with-parent), and with the sandbox's pid 1 every process inside
        if (child) killGroup(child);
        slirp?.kill('SIGKILL');
        if (perRunUid !== undefined) void killEveryProcessOf(perRunUid, perRunUid).catch(() => undefined);
      },
      terminate: () => {
        if (child?.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
        // bwrap --new-session: the command's group is the one its sandbox init (bwrap's child) leads; the outer
        // bwrap, which would take the whole sandbox down with SIGKILL (--die-with-parent), is not signaled
        if (mode === 'bwrap') for (const pid of childrenOf(child.pid)) termGroup(pid);
        else termGroup(child.pid);
      },
      end: killAll,
      bounds: async () => [...((await cgroup?.report()) ?? [])],
      remove: async () => {
        try {
          await removeTaskDir(dir);
          await cgroup?.remove();
        } finally {
          if (perRunUid !== undefined && allDead) uids?.release(perRunUid);
        }
      },
    };
  }
}
