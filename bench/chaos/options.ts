/**
 * What one chaos run does: its size, its faults, and which services it may restart. `npm run chaos` parses
 * these from flags (bench/chaos/run.ts); the short test in test/serial passes them directly.
 */
export type FaultName =
  | `kill-${'api' | 'relay' | 'bridge' | 'scheduler-worker'}-${1 | 2}`
  | `term-api-${1 | 2}`
  | 'restart-rabbitmq'
  | 'restart-postgres'
  | 'kill-temporal'
  | 'kill-temporal-history'
  | 'kill-temporal-matching'
  | 'restart-temporal-frontend'
  | 'stop-rabbitmq-leader'
  | 'stop-rabbitmq-node';

/**
 * The servers a run uses: `dev`, the Temporal dev server (one process, SQLite on disk; fault `kill-temporal`) and
 * one RabbitMQ node (fault `restart-rabbitmq`), or `cluster`, the production topology: Temporal's frontend, history,
 * matching and worker as four processes on the run's Postgres (support/temporalCluster.ts; faults
 * `kill-temporal-history`, `kill-temporal-matching`, `restart-temporal-frontend`) and a three-node RabbitMQ cluster
 * (scripts/rabbitmqCluster.ts; faults `stop-rabbitmq-leader`, `stop-rabbitmq-node`).
 */
export type Topology = 'dev' | 'cluster';

export interface ServiceControl {
  /** Postgres server URL without a database (`postgres://user@host:port`); each run creates its own database. */
  pgBase: string;
  /** The command that restarts Postgres (argv), or undefined when this run may not restart it. */
  pgRestart?: string[];
  /** RabbitMQ URL without a vhost; each run creates its own vhost through `rabbitmqctl`. */
  amqpBase: string;
  /** `rabbitmqctl` argv prefix for this broker (e.g. `['rabbitmqctl', '-n', 'chaos@localhost']`). */
  rabbitmqctl: string[];
  /**
   * A RabbitMQ cluster's nodes (Erlang node names, e.g. `rabbit-a@localhost`) when the broker is one: `amqpBase` then
   * lists every node's URL, comma-separated, in the same order, and `rabbitmqctl` addresses the first node.
   */
  rabbitmqNodes?: string[];
}

export interface ChaosOptions {
  /** graphs kept in flight at once */
  concurrentGraphs: number;
  /** tasks submitted in all (at least; more graphs are submitted while faults remain) */
  totalTasks: number;
  /** faults injected one at a time, in this order */
  faults: FaultName[];
  /** faults injected together, one group after the other, after the single ones */
  combined: FaultName[][];
  /** how long a killed process (or stopped service) stays down before it is started again */
  downMs: number;
  /** worker loops claiming work (each asks for `claimBatch` tasks a call) */
  workerSlots: number;
  claimBatch: number;
  /** the longest a task "runs" (each takes a random time up to this) */
  taskMaxMs: number;
  /** claim timeout given to the APIs: a claim a fault lost expires after this */
  claimTimeoutSeconds: number;
  /** the longest the load may take to settle after the last fault (graphs submitted late still run) */
  settleTimeoutMs: number;
  services: ServiceControl;
  /** the Temporal server's topology (`dev` when omitted) */
  topology?: Topology;
  log: (line: string) => void;
}

export const processFaults: FaultName[] = [
  'kill-api-1', 'kill-api-2', 'kill-relay-1', 'kill-relay-2', 'kill-bridge-1', 'kill-bridge-2',
  'kill-scheduler-worker-1', 'kill-scheduler-worker-2', 'term-api-1', 'term-api-2',
];
export const serviceFaults: FaultName[] = ['restart-rabbitmq', 'restart-postgres', 'kill-temporal'];
/** The Temporal cluster's faults: a service process SIGKILLed and started again, the frontend restarted (SIGTERM). */
export const clusterFaults: FaultName[] = ['kill-temporal-history', 'kill-temporal-matching', 'restart-temporal-frontend'];

/**
 * The RabbitMQ cluster's faults: `stop_app` on the node leading the bridge's quorum queue, or on another node, for
 * `downMs`. They replace `restart-rabbitmq`: a cluster is never restarted whole, one node at a time goes away.
 */
export const rabbitmqClusterFaults: FaultName[] = ['stop-rabbitmq-leader', 'stop-rabbitmq-node'];

/**
 * The faults of a topology: `kill-temporal` and `restart-rabbitmq` are the single servers'; on the cluster topology
 * the Temporal cluster's three and the RabbitMQ cluster's two take their places, alone and in the combined groups
 * (plus one group that stops a RabbitMQ follower while a relay and the Temporal frontend restart).
 */
export function topologyFaults(topology: Topology): { faults: FaultName[]; combined: FaultName[][] } {
  if (topology === 'dev') return { faults: [...processFaults, ...serviceFaults], combined: defaultCombined };
  const swap = (f: FaultName): FaultName => (f === 'kill-temporal' ? 'kill-temporal-history' : f === 'restart-rabbitmq' ? 'stop-rabbitmq-leader' : f);
  return {
    faults: [...processFaults, 'restart-postgres', ...clusterFaults, ...rabbitmqClusterFaults],
    combined: [...defaultCombined.map((group) => group.map(swap)), ['stop-rabbitmq-node', 'kill-relay-1', 'restart-temporal-frontend']],
  };
}
export const defaultCombined: FaultName[][] = [
  ['kill-relay-1', 'kill-bridge-1', 'kill-scheduler-worker-1'],
  ['kill-temporal', 'restart-rabbitmq'],
  ['restart-postgres', 'kill-api-1', 'kill-relay-2'],
  ['kill-api-1', 'kill-api-2', 'kill-bridge-2', 'kill-scheduler-worker-2'],
];

/** The machine's services, as `npm run chaos` uses them by default. */
export function machineServices(pgVersion: string): ServiceControl {
  return {
    pgBase: 'postgres://postgres@127.0.0.1:5432',
    pgRestart: ['pg_ctlcluster', '--skip-systemctl-redirect', pgVersion, 'main', 'restart', '-m', 'fast'],
    amqpBase: 'amqp://guest:guest@127.0.0.1:5672',
    rabbitmqctl: ['rabbitmqctl'],
  };
}

/**
 * Services with a RabbitMQ cluster as the broker (`--topology cluster`): Postgres stays the given one; AMQP goes to
 * every node of the cluster (scripts/rabbitmqCluster.ts), rabbitmqctl to its first node.
 */
export function clusterServices(base: ServiceControl, cluster: { nodes: { name: string; url: string }[] }): ServiceControl {
  return {
    ...base,
    amqpBase: cluster.nodes.map((n) => n.url).join(','),
    rabbitmqctl: ['rabbitmqctl', '-n', cluster.nodes[0].name],
    rabbitmqNodes: cluster.nodes.map((n) => n.name),
  };
}

export function parseFlags(args: string[]): { size: 'full' | 'short'; faults?: FaultName[]; combined: boolean; privateServices: boolean; topology: Topology; only?: string } {
  // `--name=value`, or `--name value`
  const value = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : undefined);
  const topology = (value('topology') ?? 'dev') as Topology;
  if (topology !== 'dev' && topology !== 'cluster') throw new Error(`--topology ${topology}: give dev (the Temporal dev server, one RabbitMQ node) or cluster (four Temporal processes on Postgres, three RabbitMQ nodes)`);
  const faults = value('faults')?.split(',').filter(Boolean) as FaultName[] | undefined;
  const known = new Set<string>(topologyFaults(topology).faults);
  for (const f of faults ?? []) if (!known.has(f)) throw new Error(`unknown fault ${f} for --topology ${topology}; known: ${[...known].join(', ')}`);
  return {
    size: args.includes('--short') ? 'short' : 'full',
    faults,
    combined: !args.includes('--no-combined'),
    privateServices: args.includes('--private-services'),
    topology,
  };
}
