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
  | 'restart-temporal-frontend';

/**
 * The Temporal server a run uses: `dev`, the dev server (one process, SQLite on disk; fault `kill-temporal`), or
 * `cluster`, frontend, history, matching and worker as four processes on the run's Postgres
 * (support/temporalCluster.ts; faults `kill-temporal-history`, `kill-temporal-matching`, `restart-temporal-frontend`).
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

/** The faults of a topology: `kill-temporal` is the dev server's, the cluster's three are the cluster's. */
export function topologyFaults(topology: Topology): { faults: FaultName[]; combined: FaultName[][] } {
  if (topology === 'dev') return { faults: [...processFaults, ...serviceFaults], combined: defaultCombined };
  const swap = (f: FaultName): FaultName => (f === 'kill-temporal' ? 'kill-temporal-history' : f);
  return {
    faults: [...processFaults, ...serviceFaults.filter((f) => f !== 'kill-temporal'), ...clusterFaults],
    combined: defaultCombined.map((group) => group.map(swap)),
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

export function parseFlags(args: string[]): { size: 'full' | 'short'; faults?: FaultName[]; combined: boolean; privateServices: boolean; topology: Topology; only?: string } {
  // `--name=value`, or `--name value`
  const value = (name: string) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : undefined);
  const topology = (value('topology') ?? 'dev') as Topology;
  if (topology !== 'dev' && topology !== 'cluster') throw new Error(`--topology ${topology}: give dev (the Temporal dev server) or cluster (four Temporal processes on Postgres)`);
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
