import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ServiceControl } from './options.js';

/**
 * Postgres and RabbitMQ as a chaos run sees them: restart them (the machine's services by default), or
 * start private ones (`--private-services`: a Postgres cluster on 5433 and a RabbitMQ node on 5673 in a
 * temporary directory) so that restarting them disturbs nobody else's tests.
 */
const run = (argv: string[], env?: NodeJS.ProcessEnv) => execFileSync(argv[0], argv.slice(1), { encoding: 'utf8', env: env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });

export function postgresVersion(): string {
  const versions = readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  if (!versions[0]) throw new Error('no /usr/lib/postgresql/<version> found');
  return versions[0];
}

export async function restartPostgres(svc: ServiceControl): Promise<void> {
  if (!svc.pgRestart) throw new Error('this run may not restart Postgres');
  run(svc.pgRestart);
}

/** `stop_app`, down for downMs, `start_app`: the node keeps running, the broker inside it restarts. */
export async function restartRabbitmq(svc: ServiceControl, downMs: number): Promise<void> {
  run([...svc.rabbitmqctl, 'stop_app']);
  try {
    await new Promise((r) => setTimeout(r, downMs));
  } finally {
    run([...svc.rabbitmqctl, 'start_app']);
  }
}

/**
 * A vhost of the run's own: every queue of the run (the bridges' among them) lives apart from other deployments'.
 * Returns AMQP_URL: on a cluster every node's URL with the vhost, comma-separated (a cluster's vhosts are its
 * nodes' alike).
 */
export function createVhost(svc: ServiceControl, vhost: string): string {
  run([...svc.rabbitmqctl, 'add_vhost', vhost]);
  run([...svc.rabbitmqctl, 'set_permissions', '-p', vhost, 'guest', '.*', '.*', '.*']);
  return svc.amqpBase.split(',').map((base) => `${base}/${encodeURIComponent(vhost)}`).join(',');
}

const runAsync = promisify(execFile);

/** rabbitmqctl against one node of a cluster, without blocking the harness (its workers and observer run on). */
async function clusterCtl(node: string, args: string[], timeoutS = 60): Promise<string> {
  return (await runAsync('rabbitmqctl', ['-n', node, '--timeout', String(timeoutS), ...args], { encoding: 'utf8', timeout: (timeoutS + 10) * 1000 })).stdout;
}

/** The node leading a quorum queue of a vhost now, asked of the first node whose app answers. */
export async function quorumLeader(nodes: string[], vhost: string, queue: string): Promise<string | undefined> {
  for (const node of nodes) {
    let out: string;
    try {
      out = await clusterCtl(node, ['list_queues', '-p', vhost, 'name', 'leader', '--formatter', 'json'], 15);
    } catch {
      continue;
    }
    return (JSON.parse(out) as { name: string; leader?: string }[]).find((r) => r.name === queue)?.leader || undefined;
  }
  throw new Error(`no node of ${nodes.join(', ')} answers list_queues`);
}

/** `stop_app` on one cluster node, down for downMs, `start_app`: its connections close, its replicas go away and catch up. */
export async function stopRabbitmqNode(node: string, downMs: number): Promise<void> {
  await clusterCtl(node, ['stop_app']);
  try {
    await new Promise((r) => setTimeout(r, downMs));
  } finally {
    await clusterCtl(node, ['start_app'], 120);
  }
}

export function deleteVhost(svc: ServiceControl, vhost: string): void {
  spawnSync(svc.rabbitmqctl[0], [...svc.rabbitmqctl.slice(1), 'delete_vhost', vhost], { stdio: 'ignore' });
}

export function rabbitmqVersion(svc: ServiceControl): string {
  try {
    return /RabbitMQ version: (\S+)/.exec(run([...svc.rabbitmqctl, 'status']))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export interface PrivateServices {
  control: ServiceControl;
  /** the commands that stop them by hand (a failed run leaves them up for diagnosis) */
  stopCommands: string[];
  stop(): void;
}

/** A Postgres cluster (trust auth, port 5433) and a RabbitMQ node (port 5673), both in a temporary directory. */
export function startPrivateServices(options: { pgPort?: number; amqpPort?: number } = {}): PrivateServices {
  const pgPort = options.pgPort ?? 5433;
  const amqpPort = options.amqpPort ?? 5673;
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-chaos-'));
  const bin = `/usr/lib/postgresql/${postgresVersion()}/bin`;
  const pgData = path.join(dir, 'pg');
  mkdirSync(pgData);
  // Postgres refuses to run as root; both services run as their usual system users.
  const id = (user: string) => Number(run(['id', '-u', user]).trim());
  const gid = (user: string) => Number(run(['id', '-g', user]).trim());
  const asRoot = process.getuid?.() === 0;
  const as = (user: string, argv: string[]) => (asRoot ? ['runuser', '-u', user, '--', ...argv] : argv);
  if (asRoot) {
    chownSync(dir, id('postgres'), gid('postgres'));
    chownSync(pgData, id('postgres'), gid('postgres'));
  }
  run(as('postgres', [`${bin}/initdb`, '-D', pgData, '-U', 'postgres', '--auth=trust', '-E', 'UTF8']));
  const pgCtl = as('postgres', [`${bin}/pg_ctl`, '-D', pgData, '-l', path.join(pgData, 'log'), '-o', `-p ${pgPort} -k ${pgData} -c listen_addresses=127.0.0.1 -c max_connections=300`, '-w']);
  run([...pgCtl, 'start']);

  const rabbitDir = path.join(dir, 'rabbit');
  mkdirSync(rabbitDir);
  const node = `chaos${amqpPort}@localhost`;
  writeFileSync(path.join(rabbitDir, 'rabbitmq.conf'), `listeners.tcp.local = 127.0.0.1:${amqpPort}\n`);
  writeFileSync(path.join(rabbitDir, 'rabbitmq-env.conf'), `NODENAME=${node}\n`);
  writeFileSync(path.join(rabbitDir, 'enabled_plugins'), '[].\n');
  if (asRoot) {
    // the temporary directory is the postgres user's; RabbitMQ's own lives inside it, readable by all
    spawnSync('chmod', ['755', dir]);
    spawnSync('chown', ['-R', 'rabbitmq:rabbitmq', rabbitDir]);
  }
  const rabbitEnv = {
    ...process.env,
    RABBITMQ_NODENAME: node,
    RABBITMQ_NODE_PORT: String(amqpPort),
    RABBITMQ_DIST_PORT: String(amqpPort + 20000),
    RABBITMQ_CONFIG_FILE: path.join(rabbitDir, 'rabbitmq.conf'),
    RABBITMQ_CONF_ENV_FILE: path.join(rabbitDir, 'rabbitmq-env.conf'),
    RABBITMQ_ENABLED_PLUGINS_FILE: path.join(rabbitDir, 'enabled_plugins'),
    RABBITMQ_MNESIA_BASE: path.join(rabbitDir, 'mnesia'),
    RABBITMQ_LOG_BASE: path.join(rabbitDir, 'log'),
    HOME: '/var/lib/rabbitmq',
  };
  const rabbitBin = '/usr/lib/rabbitmq/bin';
  run(as('rabbitmq', [`${rabbitBin}/rabbitmq-server`, '-detached']), rabbitEnv);
  const rabbitmqctl = as('rabbitmq', ['env', `HOME=/var/lib/rabbitmq`, `${rabbitBin}/rabbitmqctl`, '-n', node]);
  run([...rabbitmqctl, 'wait', '--timeout', '60', path.join(rabbitDir, 'mnesia', `${node}.pid`)]);
  return {
    control: {
      pgBase: `postgres://postgres@127.0.0.1:${pgPort}`,
      pgRestart: [...pgCtl, 'restart', '-m', 'fast'],
      amqpBase: `amqp://guest:guest@127.0.0.1:${amqpPort}`,
      rabbitmqctl,
    },
    stopCommands: [[...rabbitmqctl, 'stop'].join(' '), [...pgCtl, 'stop', '-m', 'fast'].join(' '), `rm -rf ${dir}`],
    stop() {
      spawnSync(rabbitmqctl[0], [...rabbitmqctl.slice(1), 'stop'], { stdio: 'ignore' });
      spawnSync(pgCtl[0], [...pgCtl.slice(1), 'stop', '-m', 'immediate'], { stdio: 'ignore' });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
