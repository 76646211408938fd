/**
 * `npm run chaos [-- --short] [-- --private-services] [-- --faults=kill-api-1,...] [-- --no-combined] [-- --topology cluster]`:
 * the fault suite at full size (200 graphs in flight, 20,000 tasks at least) against the machine's
 * Postgres and RabbitMQ (restarted as the faults say) unless --private-services starts private ones, on a Temporal
 * dev server, or with `--topology cluster` on a Temporal cluster (four processes on that Postgres) whose history and
 * matching are SIGKILLed and frontend restarted, and on a three-node RabbitMQ cluster (scripts/rabbitmqCluster.ts,
 * beside the machine's node, which it leaves alone) whose bridge-queue leader and another node are stopped.
 * Writes bench/results/chaos.json and prints the per-fault table; exits 1 when a check failed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { start as startRabbitmqCluster, stop as stopRabbitmqCluster } from '../../scripts/rabbitmqCluster.js';
import { clusterServices, machineServices, parseFlags, topologyFaults, type ChaosOptions } from './options.js';
import { postgresVersion, startPrivateServices } from './services.js';
import { runChaos } from './harness.js';
import { renderChaosTable } from './report.js';

const flags = parseFlags(process.argv.slice(2));
const log = (line: string) => console.error(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
const privateServices = flags.privateServices ? startPrivateServices() : undefined;
const rabbitmqCluster = flags.topology === 'cluster' ? await startRabbitmqCluster({ say: (line) => log(`rabbitmq cluster: ${line}`) }) : undefined;
const baseServices = privateServices?.control ?? machineServices(postgresVersion());
const full = flags.size === 'full';
const options: ChaosOptions = {
  concurrentGraphs: full ? 200 : 10,
  totalTasks: full ? 20_000 : 300,
  faults: flags.faults ?? topologyFaults(flags.topology).faults,
  combined: flags.combined ? topologyFaults(flags.topology).combined : [],
  downMs: 2000,
  workerSlots: full ? 48 : 8,
  claimBatch: 4,
  taskMaxMs: full ? 200 : 100,
  claimTimeoutSeconds: 30,
  settleTimeoutMs: full ? 1_800_000 : 180_000,
  services: rabbitmqCluster ? clusterServices(baseServices, rabbitmqCluster) : baseServices,
  topology: flags.topology,
  log,
};

let ok = false;
try {
  const result = await runChaos(options);
  ok = result.ok;
  mkdirSync('bench/results', { recursive: true });
  writeFileSync('bench/results/chaos.json', `${JSON.stringify({ size: flags.size, privateServices: flags.privateServices, ...result }, null, 2)}\n`);
  console.log(renderChaosTable(result));
  log(`${result.ok ? 'all checks passed' : 'CHECKS FAILED'}; bench/results/chaos.json written; process logs in ${result.logDir}`);
  process.exitCode = result.ok ? 0 : 1;
} finally {
  if (ok || !privateServices) privateServices?.stop();
  else log(`private services kept for diagnosis; stop them with:\n  ${privateServices.stopCommands.join('\n  ')}`);
  if (rabbitmqCluster && ok) stopRabbitmqCluster({ say: (line) => log(`rabbitmq cluster: ${line}`) });
  else if (rabbitmqCluster) log('RabbitMQ cluster kept for diagnosis; stop it with: node --import tsx scripts/rabbitmqCluster.ts stop');
}
