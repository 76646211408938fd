import { readFileSync } from 'node:fs';
import { withinTime } from '../withinTime.js';
import type { ApiDeps } from './deps.js';
import { declare, type Endpoint, type ServiceName } from './endpoint.js';
import { TgsError } from '../errors.js';
import { connectBus } from '../exchanges/bus.js';

/**
 * Taskcluster's (Dockerflow's) service endpoints, on every service: `__lbheartbeat__` (the process answers),
 * `__heartbeat__` (Postgres, RabbitMQ and Temporal are reachable) and `__version__`.
 */

/** Each backing service gets this long to answer a heartbeat. */
const CHECK_TIMEOUT_MS = 3000;
/**
 * A heartbeat answer is reused for this long: health checks of every container and load balancer hit it, and
 * each fresh check opens an AMQP connection (~10 ms here) and asks Temporal and Postgres once.
 */
const HEARTBEAT_CACHE_MS = 2000;

const version: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

function within<T>(what: string, promise: Promise<T>): Promise<T> {
  return withinTime(promise, CHECK_TIMEOUT_MS).catch((err: Error) => {
    throw new Error(`${what}: ${err.message}`);
  });
}

/** The RabbitMQ node the heartbeat reached last, per API. */
const lastNode = new WeakMap<ApiDeps, string>();

const checks: Record<string, (deps: ApiDeps) => Promise<unknown>> = {
  postgres: (deps) => deps.pool.query('SELECT 1'),
  rabbitmq: async (deps) => {
    // with several nodes (a cluster), the one that answered last goes first: a silent node ahead of it in AMQP_URL
    // would otherwise take the whole CHECK_TIMEOUT_MS every time
    const connection = await connectBus(deps.config.amqpUrl, { connectionName: 'tgs api heartbeat', first: lastNode.get(deps) });
    if (connection.node) lastNode.set(deps, connection.node);
    connection.on('error', () => undefined);
    await connection.close();
  },
  temporal: async (deps) => {
    const client = await deps.temporal.get();
    await client.workflowService.getSystemInfo({});
  },
};

type Report = Record<string, { ok: boolean; error?: string }>;
const cached = new WeakMap<ApiDeps, { at: number; report: Promise<Report> }>();

async function checkAll(deps: ApiDeps): Promise<Report> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      try {
        await within(name, check(deps));
        return [name, { ok: true }] as const;
      } catch (err) {
        return [name, { ok: false, error: (err as Error).message }] as const;
      }
    }),
  );
  return Object.fromEntries(entries);
}

export function healthEndpoints(service: ServiceName): Endpoint[] {
  return [
    declare({
      service,
      name: 'lbheartbeat',
      title: 'Load Balancer Heartbeat',
      description: 'Answers 200 `{}` while the process serves requests; checks nothing else (for load balancers).',
      method: 'get',
      route: '/__lbheartbeat__',
      async handler() {
        return {};
      },
    }),
    declare({
      service,
      name: 'heartbeat',
      title: 'Heartbeat',
      description:
        'Checks that Postgres, RabbitMQ and Temporal answer (each within 3 s): 200 with `{postgres, rabbitmq, ' +
        'temporal}` each `{ok: true}`, or 503 ServiceUnavailable naming the ones that do not. The answer is reused for 2 s.',
      method: 'get',
      route: '/__heartbeat__',
      async handler({ deps }) {
        let entry = cached.get(deps);
        if (!entry || Date.now() - entry.at > HEARTBEAT_CACHE_MS) {
          entry = { at: Date.now(), report: checkAll(deps) };
          cached.set(deps, entry);
        }
        const report = await entry.report;
        const down = Object.entries(report).filter(([, r]) => !r.ok);
        if (down.length > 0) {
          throw new TgsError('ServiceUnavailable', `Unreachable: ${down.map(([name, r]) => `${name} (${r.error})`).join('; ')}`, { services: report });
        }
        return report;
      },
    }),
    declare({
      service,
      name: 'version',
      title: 'Version',
      description: 'Which tgs this is: `{source, version}`.',
      method: 'get',
      route: '/__version__',
      async handler() {
        return { source: 'tgs', version };
      },
    }),
  ];
}
