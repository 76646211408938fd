// A local three-node RabbitMQ cluster beside the machine's own node (rabbit@localhost, port 5672, left alone), for
// trying tgs on a cluster and for the tests that fail its nodes over (test/serial/rabbitmqCluster.test.ts).
//
//   node --import tsx scripts/rabbitmqCluster.ts start    # forms it (about 40 s), prints AMQP_URL
//   node --import tsx scripts/rabbitmqCluster.ts status   # which nodes run, which are joined
//   node --import tsx scripts/rabbitmqCluster.ts stop     # stops its own nodes, removes its directory
//
// Nodes rabbit-a@localhost, rabbit-b@localhost, rabbit-c@localhost listen on 127.0.0.1:5681-5683 (distribution
// ports 25681-25683). Everything lives under one directory it owns (TGS_RABBITMQ_CLUSTER_DIR, default
// /tmp/tgs-rabbitmq-cluster), owned by the `rabbitmq` user: rabbitmq-server started as root switches to that user
// and keeps the RABBITMQ_* variables, so the nodes share the machine node's Erlang cookie. Each node has its own
// config file (the machine's /etc/rabbitmq/rabbitmq.conf binds every node to 5672) and an enabled-plugins file
// holding `[].` (the management plugin's port would clash too). `start` is idempotent: it starts only the nodes
// not running and joins only the nodes not joined. Importable: start() → {url, urls, nodes}, stopNode, killNode,
// startNode, leaderOf, status, stop.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import path from 'node:path';

export interface ClusterNode {
  /** Erlang node name, e.g. `rabbit-a@localhost` (what rabbitmqctl -n takes) */
  name: string;
  /** AMQP port on 127.0.0.1 */
  port: number;
  /** its AMQP URL (guest/guest, which RabbitMQ admits from localhost) */
  url: string;
}

export interface Cluster {
  /** AMQP_URL for tgs: every node's URL, comma-separated */
  url: string;
  urls: string[];
  nodes: ClusterNode[];
}

const LETTERS = ['a', 'b', 'c'];
const FIRST_PORT = 5681;
const FIRST_DIST_PORT = 25681;

export function clusterDir(): string {
  return process.env.TGS_RABBITMQ_CLUSTER_DIR || '/tmp/tgs-rabbitmq-cluster';
}

export function clusterNodes(): ClusterNode[] {
  return LETTERS.map((letter, k) => ({
    name: `rabbit-${letter}@localhost`,
    port: FIRST_PORT + k,
    url: `amqp://guest:guest@127.0.0.1:${FIRST_PORT + k}`,
  }));
}

function describe(): Cluster {
  const nodes = clusterNodes();
  return { url: nodes.map((n) => n.url).join(','), urls: nodes.map((n) => n.url), nodes };
}

/** Where progress lines go (stdout for the command line; tests may pass their own). */
export type Say = (line: string) => void;
const defaultSay: Say = (line) => console.log(`rabbitmq cluster: ${line}`);

function node(name: string): ClusterNode {
  const found = clusterNodes().find((n) => n.name === name || n.name.startsWith(`${name}@`) || n.name === `rabbit-${name}@localhost`);
  if (!found) throw new Error(`no node ${JSON.stringify(name)} in the cluster: ${clusterNodes().map((n) => n.name).join(', ')}`);
  return found;
}

/** rabbitmqctl against one of the cluster's nodes; throws with its output when it fails. */
function ctl(nodeName: string, args: string[], timeoutS = 60): string {
  const r = spawnSync('rabbitmqctl', ['-n', nodeName, '--timeout', String(timeoutS), ...args], { encoding: 'utf8', timeout: (timeoutS + 10) * 1000 });
  if (r.status !== 0) throw new Error(`rabbitmqctl -n ${nodeName} ${args.join(' ')} failed (${r.status ?? r.signal}): ${(r.stderr || r.stdout || r.error?.message || '').trim()}`);
  return r.stdout;
}

/** Whether the node's Erlang VM answers (its app may be stopped). */
function vmRunning(nodeName: string): boolean {
  return spawnSync('rabbitmqctl', ['-n', nodeName, '--timeout', '5', 'eval', 'ok.'], { encoding: 'utf8', timeout: 20_000 }).status === 0;
}

/** Waits until a just launched node's VM answers (rabbitmqctl cannot await the startup of a VM not up yet). */
function untilVmRunning(nodeName: string, timeoutS = 90): void {
  const deadline = Date.now() + timeoutS * 1000;
  while (!vmRunning(nodeName)) {
    if (Date.now() > deadline) throw new Error(`${nodeName} did not start within ${timeoutS} s: see ${path.join(clusterDir(), nodeName.split('@')[0], 'log')}`);
    spawnSync('sleep', ['0.5']);
  }
}

function nodeDir(n: ClusterNode): string {
  return path.join(clusterDir(), n.name.split('@')[0]);
}

function rabbitmqUser(): { uid: number; gid: number } {
  const r = spawnSync('id', ['-u', 'rabbitmq'], { encoding: 'utf8' });
  const g = spawnSync('id', ['-g', 'rabbitmq'], { encoding: 'utf8' });
  if (r.status !== 0 || g.status !== 0) throw new Error('no `rabbitmq` user: install RabbitMQ (apt-get install rabbitmq-server)');
  return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
}

/** Writes the node's directories and files (owned by `rabbitmq`) and starts its VM, detached; its output goes to its log. */
function launch(n: ClusterNode, k: number): void {
  const dir = nodeDir(n);
  const { uid, gid } = rabbitmqUser();
  for (const d of [clusterDir(), dir, path.join(dir, 'mnesia'), path.join(dir, 'log')]) {
    mkdirSync(d, { recursive: true });
    chownSync(d, uid, gid);
  }
  const files: Record<string, string> = {
    'rabbitmq.conf': `listeners.tcp.local = 127.0.0.1:${n.port}\nloopback_users.guest = true\n`,
    'enabled_plugins': '[].\n',
  };
  for (const [file, text] of Object.entries(files)) {
    writeFileSync(path.join(dir, file), text);
    chownSync(path.join(dir, file), uid, gid);
  }
  const out = openSync(path.join(dir, 'log', 'server.out'), 'a');
  chownSync(path.join(dir, 'log', 'server.out'), uid, gid);
  const child = spawn('rabbitmq-server', [], {
    detached: true,
    stdio: ['ignore', out, out],
    cwd: dir,
    env: {
      ...process.env,
      RABBITMQ_NODENAME: n.name,
      RABBITMQ_NODE_PORT: String(n.port),
      RABBITMQ_DIST_PORT: String(FIRST_DIST_PORT + k),
      RABBITMQ_CONFIG_FILE: path.join(dir, 'rabbitmq.conf'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(dir, 'enabled_plugins'),
      RABBITMQ_MNESIA_BASE: path.join(dir, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(dir, 'log'),
      RABBITMQ_PID_FILE: path.join(dir, 'rabbitmq.pid'),
    },
  });
  child.unref();
}

interface ClusterStatus {
  running_nodes?: string[];
  disk_nodes?: string[];
}

function clusterStatus(nodeName: string): ClusterStatus {
  return JSON.parse(ctl(nodeName, ['cluster_status', '--formatter', 'json'], 15)) as ClusterStatus;
}

/**
 * Starts the nodes not running, waits for each, and joins b and c to a where they are not members yet. Returns the
 * nodes and AMQP_URL. Forming from nothing takes about 40 s on two cores.
 */
export async function start(options: { say?: Say } = {}): Promise<Cluster> {
  const log = options.say ?? defaultSay;
  if (userInfo().uid !== 0) throw new Error('run it as root: rabbitmq-server switches to the rabbitmq user, which owns the nodes\' directories');
  const nodes = clusterNodes();
  const startedAt = Date.now();
  const seconds = () => `${((Date.now() - startedAt) / 1000).toFixed(0)} s`;
  nodes.forEach((n, k) => {
    if (vmRunning(n.name)) {
      log(`${n.name} already running`);
      return;
    }
    log(`starting ${n.name} on 127.0.0.1:${n.port} (data and logs in ${nodeDir(n)})`);
    launch(n, k);
  });
  for (const n of nodes) {
    untilVmRunning(n.name);
    ctl(n.name, ['await_startup'], 120);
    log(`${n.name} up (${seconds()})`);
  }
  const [first, ...rest] = nodes;
  for (const n of rest) {
    const members = clusterStatus(n.name).disk_nodes ?? [];
    if (members.includes(first.name)) {
      ctl(n.name, ['start_app']);
      continue;
    }
    log(`joining ${n.name} to ${first.name}`);
    ctl(n.name, ['stop_app']);
    ctl(n.name, ['reset']);
    ctl(n.name, ['join_cluster', first.name], 120);
    ctl(n.name, ['start_app'], 120);
    log(`${n.name} joined (${seconds()})`);
  }
  for (const n of nodes) ctl(n.name, ['start_app'], 120);
  const running = clusterStatus(first.name).running_nodes ?? [];
  log(`cluster of ${running.length} node(s) running: ${running.join(', ')} (${seconds()})`);
  return describe();
}

/** Stops a node's RabbitMQ application (its VM stays up): its connections close, its queue replicas go away. */
export function stopNode(name: string): void {
  ctl(node(name).name, ['stop_app']);
}

/**
 * Kills a node's Erlang VM with SIGKILL (a crash, not a shutdown): its connections drop without a close. Only the
 * VM whose pid its own pid file holds is killed.
 */
export function killNode(name: string): void {
  const n = node(name);
  const pidFile = path.join(nodeDir(n), 'rabbitmq.pid');
  const pid = existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) : NaN;
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`${n.name}: no pid in ${pidFile}; is it running?`);
  process.kill(pid, 'SIGKILL');
  for (let k = 0; k < 100 && vmRunning(n.name); k++) spawnSync('sleep', ['0.1']);
}

/** Starts a node again after stopNode (its application) or killNode (its VM too); it rejoins and catches up. */
export function startNode(name: string): void {
  const n = node(name);
  if (vmRunning(n.name)) {
    ctl(n.name, ['start_app'], 120);
    return;
  }
  launch(n, clusterNodes().findIndex((x) => x.name === n.name));
  untilVmRunning(n.name);
  ctl(n.name, ['await_startup'], 120);
}

/** The node leading a quorum queue now (asked of the first node whose app runs), or undefined if it has none. */
export function leaderOf(queue: string): string | undefined {
  for (const n of clusterNodes()) {
    let out: string;
    try {
      out = ctl(n.name, ['list_queues', 'name', 'type', 'leader', '--formatter', 'json'], 15);
    } catch {
      continue;
    }
    const rows = JSON.parse(out) as { name: string; type: string; leader?: string }[];
    const row = rows.find((r) => r.name === queue);
    return row?.leader || undefined;
  }
  throw new Error('no node of the cluster answers list_queues');
}

/** Each node: whether its VM and its app run, and the cluster's running members as the first answering node sees them. */
export function status(): { nodes: { name: string; port: number; vm: boolean }[]; running: string[] } {
  const nodes = clusterNodes().map((n) => ({ name: n.name, port: n.port, vm: vmRunning(n.name) }));
  let running: string[] = [];
  for (const n of nodes.filter((x) => x.vm)) {
    try {
      running = clusterStatus(n.name).running_nodes ?? [];
      break;
    } catch {
      // its app is stopped: ask the next
    }
  }
  return { nodes, running };
}

/** Stops this script's nodes (never the machine's own) and removes its directory. */
export function stop(options: { say?: Say } = {}): void {
  const log = options.say ?? defaultSay;
  for (const n of clusterNodes()) {
    if (!vmRunning(n.name)) continue;
    log(`stopping ${n.name}`);
    ctl(n.name, ['stop'], 60);
  }
  if (existsSync(clusterDir())) rmSync(clusterDir(), { recursive: true, force: true });
  log(`stopped; removed ${clusterDir()}`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const command = process.argv[2];
  try {
    if (command === 'start') {
      const cluster = await start();
      console.log(`AMQP_URL=${cluster.url}`);
    } else if (command === 'stop') {
      stop();
    } else if (command === 'status') {
      const s = status();
      for (const n of s.nodes) console.log(`${n.name} 127.0.0.1:${n.port} ${n.vm ? (s.running.includes(n.name) ? 'running' : 'VM up, app stopped') : 'stopped'}`);
    } else {
      console.error('usage: node --import tsx scripts/rabbitmqCluster.ts start|stop|status');
      process.exitCode = 2;
    }
  } catch (err) {
    console.error(`rabbitmq cluster: ${(err as Error).message}`);
    process.exitCode = 1;
  }
}
