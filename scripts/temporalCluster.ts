/**
 * `npm run temporal-cluster -- start|stop`: a Temporal cluster on this machine's Postgres, as platform teams run
 * Temporal (frontend, history, matching and worker as four processes; support/temporalCluster.ts), to try tgs on
 * (docs/deployments.md, "Try tgs on a Temporal cluster").
 *
 *   start [--name local] [--shards 4] [--drop-on-exit]   runs in the foreground until Ctrl-C, which stops the four
 *                                                          processes (and keeps the databases unless --drop-on-exit:
 *                                                          the next start with the same name keeps its workflows)
 *   stop [--name local] [--drop]                          stops the cluster started in another shell; --drop drops
 *                                                          its databases too
 *
 * Postgres: 127.0.0.1:5432, user postgres, unless PGHOST / PGPORT / PGUSER / PGPASSWORD say otherwise.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { CLUSTER_SERVICES, clusterDatabases, dropTemporalClusterDatabases, startTemporalCluster } from '../support/temporalCluster.js';

const say = (line: string) => console.error(`temporal-cluster: ${line}`);

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    name: { type: 'string', default: 'local' },
    shards: { type: 'string', default: '4' },
    'drop-on-exit': { type: 'boolean', default: false },
    drop: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
const command = positionals[0];
const usage = 'usage: npm run temporal-cluster -- start [--name local] [--shards 4] [--drop-on-exit]\n       npm run temporal-cluster -- stop [--name local] [--drop]';
if (values.help || (command !== 'start' && command !== 'stop')) {
  console.error(usage);
  process.exit(values.help ? 0 : 2);
}

const name = values.name;
const dir = path.resolve('.tgs-cluster', name);
const stateFile = path.join(dir, 'cluster.json');
const postgres = {
  host: process.env.PGHOST || '127.0.0.1',
  port: Number(process.env.PGPORT || 5432),
  user: process.env.PGUSER || 'postgres',
  password: process.env.PGPASSWORD || '',
};

interface State {
  pid: number;
  address: string;
  processes: Record<string, { pid: number }>;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function start() {
  if (existsSync(stateFile)) {
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
    if (alive(state.pid)) {
      say(`the cluster "${name}" already runs (pid ${state.pid}, frontend ${state.address}); stop it with \`npm run temporal-cluster -- stop --name ${name}\` or pick another --name`);
      process.exit(1);
    }
  }
  const shards = Number(values.shards);
  if (!Number.isInteger(shards) || shards < 1) {
    say(`--shards ${values.shards}: give a whole number ≥ 1`);
    process.exit(2);
  }
  mkdirSync(dir, { recursive: true });
  // Ctrl-C while starting: exit, which SIGKILLs the processes started so far (support/temporalCluster.ts)
  const interrupted = () => process.exit(130);
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  const cluster = await startTemporalCluster({ name, dir, shards, postgres, log: say });
  process.off('SIGINT', interrupted);
  process.off('SIGTERM', interrupted);
  writeFileSync(stateFile, JSON.stringify({ pid: process.pid, address: cluster.address, processes: cluster.processes }, null, 2));
  console.log(`Temporal cluster "${name}": frontend ${cluster.address}, namespace ${cluster.namespace}, ${shards} history shards`);
  for (const service of CLUSTER_SERVICES) {
    const p = cluster.processes[service];
    console.log(`  ${service.padEnd(9)} pid ${p.pid}, gRPC 127.0.0.1:${p.port}, metrics http://127.0.0.1:${p.metricsPort}/metrics, log ${p.logFile}`);
  }
  console.log(`  databases ${cluster.databases.main}, ${cluster.databases.visibility} on ${postgres.host}:${postgres.port}`);
  console.log(`Use it:  TEMPORAL_ADDRESS=${cluster.address} npx tgs dev --workers 2`);
  console.log('Ctrl-C stops the cluster' + (values['drop-on-exit'] ? ' and drops its databases.' : ' (its databases stay; --drop-on-exit drops them).'));
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: stopping the four processes`);
    await cluster.stop({ dropDatabases: values['drop-on-exit'] });
    rmSync(stateFile, { force: true });
    say('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

async function stop() {
  if (existsSync(stateFile)) {
    const state = JSON.parse(readFileSync(stateFile, 'utf8')) as State;
    if (alive(state.pid)) {
      say(`stopping the cluster "${name}" (pid ${state.pid})`);
      process.kill(state.pid, 'SIGTERM');
      const deadline = Date.now() + 30_000;
      while (alive(state.pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    } else {
      // the script that started them was killed: its processes may still run
      for (const [service, { pid }] of Object.entries(state.processes)) {
        const cmdline = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, 'utf8') : '';
        if (cmdline.includes('temporal-server') && cmdline.includes(service)) {
          say(`the script that started the cluster is gone; stopping its ${service} (pid ${pid})`);
          process.kill(pid, 'SIGTERM');
        }
      }
    }
    rmSync(stateFile, { force: true });
  } else {
    say(`no cluster "${name}" runs from ${dir}`);
  }
  if (values.drop) {
    const { main, visibility } = clusterDatabases(name);
    await dropTemporalClusterDatabases(name, postgres);
    say(`dropped ${main} and ${visibility}`);
  }
}

try {
  await (command === 'start' ? start() : stop());
} catch (err) {
  say((err as Error).message);
  process.exit(1);
}
