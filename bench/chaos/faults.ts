import type { FaultName, ServiceControl } from './options.js';
import type { Fleet } from './processes.js';
import { ClusterTemporal, DurableTemporal } from './temporal.js';
import { quorumLeader, restartPostgres, restartRabbitmq, stopRabbitmqNode } from './services.js';

/** One fault as it happened. */
export interface FaultRecord {
  name: FaultName;
  startedAt: number;
  /** when the process or service was back (started again) */
  restartedAt: number;
  /** a restarted tgs process: ms from its start to its ready line (a relay: to its database session) */
  readyAfterMs?: number;
  /** the restarted process's readiness (the harness awaits it before a fault touches that process type again) */
  ready?: Promise<void>;
  /** SIGTERM only: how long the API took to exit, and how */
  graceful?: { exitedAfterMs: number; code: number | null; signal: NodeJS.Signals | null };
  error?: string;
  /** a RabbitMQ cluster fault: the node whose app was stopped */
  node?: string;
}

export interface FaultTargets {
  fleet: Fleet;
  temporal: DurableTemporal | ClusterTemporal;
  services: ServiceControl;
  downMs: number;
  /**
   * Relay sessions open in the run's database: the relay prints nothing while it stands by, so a restarted
   * relay counts as ready once both copies hold a session (the active one LISTENs, the other polls the lock).
   */
  relaySessions: () => Promise<number>;
  /** takes API `index` (0-based) out of the workers' rotation, or puts it back */
  outOfRotation: (index: number, isOut: boolean) => void;
  /** the run's vhost and the bridge's quorum queue in it (the RabbitMQ cluster's faults look up its leader) */
  bridgeQueue: { vhost: string; name: string };
}

async function relaysReady(t: FaultTargets, restartedAt: number, timeoutMs: number): Promise<number | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if ((await t.relaySessions().catch(() => 0)) >= 2) return Date.now() - restartedAt;
    await new Promise((r) => setTimeout(r, 200));
  }
  return undefined;
}

/**
 * Injects one fault and undoes it as a supervisor (or an operator) would: a SIGKILLed process is started
 * again after `downMs`; an API gets SIGTERM as in a rolling deploy (taken out of the workers' rotation at the same
 * moment, as a Kubernetes Service does) and is started again once it exited, back in rotation once ready;
 * RabbitMQ's app is stopped for `downMs`; Postgres restarts in fast mode; the Temporal dev server is SIGKILLed
 * and started again after `downMs` on its history file; a Temporal cluster's history or matching process is
 * SIGKILLed and started again after `downMs`, its frontend restarted at once (SIGTERM, then started: a rolling
 * restart), the cluster's other processes serving on; a RabbitMQ cluster's node (the one leading the bridge's quorum
 * queue, or another) has its app stopped for `downMs`, the two others serving on.
 */
export async function injectFault(name: FaultName, t: FaultTargets): Promise<FaultRecord> {
  const startedAt = Date.now();
  const record: FaultRecord = { name, startedAt, restartedAt: startedAt };
  const pause = () => new Promise((r) => setTimeout(r, t.downMs));
  try {
    const kill = /^kill-(api|relay|bridge|scheduler-worker)-([12])$/.exec(name);
    const term = /^term-api-([12])$/.exec(name);
    if (kill) {
      const p = t.fleet.get(`${kill[1]}-${kill[2]}`);
      await p.stop('SIGKILL');
      await pause();
      p.start();
      record.restartedAt = Date.now();
      const restartedAt = record.restartedAt;
      const ready = p.command === 'relay' ? relaysReady(t, restartedAt, 60_000) : p.waitReady(180_000);
      record.ready = ready.then((ms) => void (record.readyAfterMs = ms));
    } else if (term) {
      const p = t.fleet.get(`api-${term[1]}`);
      const index = Number(term[1]) - 1;
      t.outOfRotation(index, true);
      record.graceful = await p.stop('SIGTERM');
      p.start();
      record.restartedAt = Date.now();
      record.ready = p.waitReady(180_000).then((ms) => {
        record.readyAfterMs = ms;
        t.outOfRotation(index, false);
      });
    } else if (name === 'restart-rabbitmq') {
      await restartRabbitmq(t.services, t.downMs);
    } else if (name === 'restart-postgres') {
      await restartPostgres(t.services);
    } else if (name === 'kill-temporal') {
      if (!(t.temporal instanceof DurableTemporal)) throw new Error('kill-temporal is the dev server\'s fault; a cluster has kill-temporal-history, kill-temporal-matching, restart-temporal-frontend');
      await t.temporal.kill();
      await pause();
      await t.temporal.up();
    } else if (name === 'kill-temporal-history' || name === 'kill-temporal-matching' || name === 'restart-temporal-frontend') {
      if (!(t.temporal instanceof ClusterTemporal)) throw new Error(`${name} needs --topology cluster`);
      const service = name === 'restart-temporal-frontend' ? 'frontend' : name === 'kill-temporal-history' ? 'history' : 'matching';
      if (name !== 'restart-temporal-frontend') {
        await t.temporal.kill(service);
        await pause();
      }
      record.readyAfterMs = await t.temporal.restart(service);
    } else if (name === 'stop-rabbitmq-leader' || name === 'stop-rabbitmq-node') {
      const nodes = t.services.rabbitmqNodes;
      if (!nodes || nodes.length < 3) throw new Error(`${name} needs a RabbitMQ cluster of three nodes (--topology cluster)`);
      const leader = await quorumLeader(nodes, t.bridgeQueue.vhost, t.bridgeQueue.name);
      if (!leader) throw new Error(`the bridge queue ${t.bridgeQueue.name} has no leader in vhost ${t.bridgeQueue.vhost}`);
      // another node: the one after the leader in the list, so that successive runs stop the same kind of node
      record.node = name === 'stop-rabbitmq-leader' ? leader : nodes[(nodes.indexOf(leader) + 1) % nodes.length];
      record.startedAt = Date.now();
      await stopRabbitmqNode(record.node, t.downMs);
    } else {
      throw new Error(`unknown fault ${name}`);
    }
    if (!kill && !term) record.restartedAt = Date.now();
  } catch (err) {
    record.error = (err as Error).message;
    record.restartedAt = Date.now();
  }
  return record;
}

/** Several faults at once (each undone on its own schedule). */
export async function injectFaults(names: FaultName[], t: FaultTargets): Promise<FaultRecord[]> {
  return Promise.all(names.map((n) => injectFault(n, t)));
}
