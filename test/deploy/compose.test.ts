import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { parse } from 'yaml';
import { buildProgram } from '../../src/cli/main.js';
import { DEFAULT_DYNAMIC_CONFIG } from '../../src/temporal/devServer.js';
import { checkTgsCommand, composeSecrets, healthEndpoint, secretProblems } from './deploymentRules.js';

// docker compose cannot run here: these checks are what can be checked without it.
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
const text = read('docker-compose.yml');
// YAML merge keys (`<<: *tgs`) as docker compose applies them
const compose = parse(text, { merge: true }) as { services: Record<string, Service>; networks?: Record<string, { internal?: boolean } | null> };

interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  entrypoint?: string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  network_mode?: string;
  networks?: string[] | Record<string, { aliases?: string[] } | null>;
  environment?: Record<string, string> | string[];
  ports?: string[];
  volumes?: string[];
  restart?: string;
  user?: string;
  cap_drop?: string[];
  healthcheck?: { test?: string[] | string; interval?: string; timeout?: string; retries?: number; disable?: boolean };
}

const services = compose.services;
const isTgs = (s: Service) => s.build === '.' || s.image?.startsWith('tgs:') === true;
const dependsOn = (s: Service): Record<string, { condition?: string }> =>
  Array.isArray(s.depends_on) ? Object.fromEntries(s.depends_on.map((d) => [d, {}])) : (s.depends_on ?? {});
const networksOf = (s: Service) => (Array.isArray(s.networks) ? s.networks : Object.keys(s.networks ?? {}));
const envOf = (s: Service): Record<string, string> =>
  Array.isArray(s.environment) ? Object.fromEntries(s.environment.map((e) => e.split('=', 2) as [string, string])) : (s.environment ?? {});
const DATA_SERVICES = ['postgres', 'rabbitmq', 'temporal'];
/** the one-shot jobs: they run to their end before what depends on them starts */
const ONE_SHOT = ['tgs-migrate', 'temporal-schema', 'temporal-namespace'];

test('docker-compose.yml parses and has the deployment: Postgres, RabbitMQ with its management UI, Temporal (server, schema job, namespace job) with its Web UI, the tgs processes and their migration job', () => {
  for (const name of ['postgres', 'rabbitmq', 'temporal', 'temporal-schema', 'temporal-namespace', 'temporal-ui', 'tgs-migrate', 'api', 'relay', 'bridge', 'scheduler-worker', 'shell-worker']) {
    assert.ok(services[name], `service ${name}`);
  }
  assert.match(services.rabbitmq.image ?? '', /management/);
  assert.match(services['temporal-ui'].image ?? '', /^temporalio\/ui:/);
  // the server the Temporal CLI tgs builds embeds (src/temporal/devServer.ts), not the deprecated auto-setup image
  assert.equal(services.temporal.image, 'temporalio/server:1.29.1');
  for (const job of ['temporal-schema', 'temporal-namespace']) assert.match(services[job].image ?? '', /^temporalio\/admin-tools:1\.29\.1-/);
  for (const name of ['tgs-migrate', 'api', 'relay', 'bridge', 'scheduler-worker', 'shell-worker']) assert.ok(isTgs(services[name]), `${name} runs the tgs image`);
  assert.ok(!text.includes('auto-setup'), 'no temporalio/auto-setup');
});

test('the shell worker is on no network of Postgres, RabbitMQ or Temporal, shares no namespace, and reaches the API under the root URL', () => {
  for (const [name, s] of Object.entries(services)) assert.equal(s.network_mode, undefined, `${name} shares another's network (network_mode)`);
  const worker = services['shell-worker'];
  const workerNetworks = networksOf(worker);
  assert.ok(workerNetworks.length > 0, 'the worker names its networks (else it joins the default network, with everything else)');
  for (const data of DATA_SERVICES) {
    const shared = networksOf(services[data]).filter((n) => workerNetworks.includes(n));
    assert.deepEqual(shared, [], `the shell worker shares ${shared.join(', ')} with ${data}`);
    assert.ok(networksOf(services[data]).length > 0, `${data} names its networks`);
  }
  // the only other service on the worker's networks is the API
  for (const [name, s] of Object.entries(services)) {
    if (name === 'shell-worker' || name === 'api') continue;
    assert.deepEqual(networksOf(s).filter((n) => workerNetworks.includes(n)), [], `${name} is on the shell worker's network`);
  }
  // TGS_ROOT_URL (artifact upload URLs are built from it) names the API on the worker's network, on the port the API
  // listens on in its container and is published on
  const rootUrl = new URL(envOf(worker).TGS_ROOT_URL.replace(/\$\{TGS_PUBLIC_HOST:-([^}]+)\}/, '$1'));
  assert.equal(envOf(services.api).TGS_ROOT_URL, envOf(worker).TGS_ROOT_URL, 'the API and the worker agree on the root URL');
  const apiNetworks = services.api.networks as Record<string, { aliases?: string[] } | null>;
  const shared = workerNetworks.filter((n) => Object.keys(apiNetworks).includes(n));
  assert.equal(shared.length, 1, 'the API is on the worker\'s network');
  const aliases = (apiNetworks[shared[0]]?.aliases ?? []).map((a) => a.replace(/\$\{TGS_PUBLIC_HOST:-([^}]+)\}/, '$1'));
  assert.ok(aliases.includes(rootUrl.hostname), `the API is known as ${rootUrl.hostname} on ${shared[0]} (aliases: ${aliases.join(', ')})`);
  assert.equal(rootUrl.port, envOf(services.api).PORT ?? '8080', 'the root URL\'s port is the one the API listens on');
  assert.ok(services.api.ports?.includes(`${rootUrl.port}:${rootUrl.port}`), 'and the one published on the host');
  assert.equal(compose.networks?.[shared[0]]?.internal, true, 'the tasks\' network has no route out');
  assert.ok(dependsOn(worker).api, 'the worker starts after the API');
});

test('every password comes from .env and is required; no well-known password appears; .env.example lists each with no value', () => {
  assert.deepEqual(secretProblems(compose, composeSecrets), []);
  // the rule can fail: what docker-compose.yml used to say is refused
  const old = parse(`
services:
  postgres: { environment: { POSTGRES_USER: tgs, POSTGRES_PASSWORD: tgs } }
  api: { environment: { DATABASE_URL: "postgres://tgs:tgs@postgres:5432/tgs", AMQP_URL: "amqp://guest:guest@rabbitmq:5672" } }
  temporal: { environment: ["POSTGRES_PWD=\${TEMPORAL_DB_PASSWORD:-temporal}"] }
  worker: { environment: { TGS_ACCESS_TOKEN: "abc" } }
`);
  assert.equal(secretProblems(old, composeSecrets).length, 5, secretProblems(old, composeSecrets).join('\n'));
  // every variable the file requires is in .env.example, whose values are all blank
  const example = read('.env.example');
  const required = new Set([...text.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((m) => m[1]));
  assert.ok(required.size >= 6, [...required].join(', '));
  for (const name of required) assert.match(example, new RegExp(`^${name}=$`, 'm'), `.env.example lists ${name}, blank`);
  for (const line of example.split('\n').filter((l) => /^[A-Z0-9_]+=/.test(l))) assert.match(line, /=$/, `.env.example gives no value: ${line}`);
  assert.match(example, /openssl rand/, '.env.example says how to make a password');
  assert.match(read('.gitignore'), /^\.env$/m, '.env is never committed');
});

test('only the API and the two Web UIs are published, the UIs on the loopback interface only', () => {
  const published = Object.entries(services).filter(([, s]) => (s.ports ?? []).length > 0).map(([name]) => name).sort();
  assert.deepEqual(published, ['api', 'rabbitmq', 'temporal-ui']);
  for (const [name, container] of [['temporal-ui', '8080'], ['rabbitmq', '15672']]) {
    for (const port of services[name].ports ?? []) {
      // short syntax: [IP:]HOST:CONTAINER — without an IP, Docker binds every interface
      const parts = String(port).split(':');
      assert.ok(parts.length === 3 && ['127.0.0.1', '[::1]'].includes(parts[0]), `${name} publishes ${port} beyond 127.0.0.1`);
      assert.equal(parts[2], container, `${name} publishes its UI, nothing else`);
    }
  }
});

test('Postgres: the superuser is for initialisation; tgs-migrate connects as the owner role, the tgs processes as the app role, Temporal as its own', () => {
  const pgEnv = envOf(services.postgres);
  assert.equal(pgEnv.POSTGRES_USER, 'postgres', 'the image\'s superuser is no role tgs or Temporal uses');
  const init = read('deploy/postgres/initdb/10-roles.sh');
  assert.ok(services.postgres.volumes?.includes('./deploy/postgres/initdb:/docker-entrypoint-initdb.d:ro'));
  const psqlMount = services.postgres.volumes?.find((v) => v.startsWith('./deploy/postgres/tgs-roles.psql:'));
  assert.ok(psqlMount && init.includes(`-f ${psqlMount.split(':')[1]}`), 'the init script runs the mounted tgs-roles.psql');
  const roleOf = (url: string) => /^postgres:\/\/([^:]+):/.exec(url)?.[1];
  assert.match(init, new RegExp(`-v owner_role=${roleOf(envOf(services['tgs-migrate']).DATABASE_URL)} `));
  for (const name of ['api', 'relay', 'bridge', 'scheduler-worker']) {
    assert.match(init, new RegExp(`-v app_role=${roleOf(envOf(services[name]).DATABASE_URL)} `), `${name} connects as the app role`);
  }
  assert.notEqual(roleOf(envOf(services.api).DATABASE_URL), roleOf(envOf(services['tgs-migrate']).DATABASE_URL));
  for (const s of [services.temporal, services['temporal-schema']]) {
    const env = envOf(s);
    assert.equal(env.POSTGRES_USER ?? env.SQL_USER, 'temporal');
  }
  assert.match(init, /CREATE ROLE temporal LOGIN PASSWORD :'temporal_password' NOSUPERUSER NOCREATEDB NOCREATEROLE/);
  // every variable the init script needs is in the postgres service's environment
  for (const m of init.matchAll(/\$\{([A-Z0-9_]+):\?/g)) assert.ok(pgEnv[m[1]], `postgres passes ${m[1]} to its init script`);
  assert.equal(envOf(services.rabbitmq).RABBITMQ_DEFAULT_USER, 'tgs', 'RabbitMQ makes its own user, not guest');
});

test('start order: the one-shot jobs finish first (migrations, Temporal\'s schema and namespace), each service waits for what it needs to be healthy', () => {
  const names = new Set(Object.keys(services));
  for (const [name, s] of Object.entries(services)) {
    for (const [dep, { condition }] of Object.entries(dependsOn(s))) {
      assert.ok(names.has(dep), `${name} depends on unknown service ${dep}`);
      assert.equal(condition, ONE_SHOT.includes(dep) ? 'service_completed_successfully' : 'service_healthy', `${name} waits for ${dep}`);
      if (!ONE_SHOT.includes(dep)) assert.ok(services[dep].healthcheck?.test, `${dep} has a health check to wait for`);
    }
  }
  for (const job of ONE_SHOT) assert.ok(['no', 'on-failure', undefined].includes(services[job].restart?.replace(/:\d+$/, '')), `${job} is not restarted once done`);
  for (const name of ['api', 'relay', 'bridge', 'scheduler-worker']) {
    assert.ok(dependsOn(services[name])['tgs-migrate'], `${name} starts after tgs migrate`);
    assert.ok(dependsOn(services[name])['temporal-namespace'], `${name} starts once Temporal has its namespace`);
  }
  assert.ok(dependsOn(services.temporal)['temporal-schema'], 'Temporal starts after its schema job');
  assert.ok(dependsOn(services['temporal-schema']).postgres);
  assert.ok(dependsOn(services['tgs-migrate']).postgres);
  // the schema job runs temporal-sql-tool against both of Temporal's databases
  const script = read('deploy/temporal/setup-schema.sh');
  assert.ok(services['temporal-schema'].volumes?.some((v) => v.startsWith('./deploy/temporal/setup-schema.sh:')));
  for (const step of ['setup-schema -v 0.0', 'update-schema -d']) assert.ok(script.includes(step), step);
  assert.match(script, /for db in temporal temporal_visibility/);
});

test("the Temporal server reads deploy/temporal-dynamicconfig.yaml, which holds exactly the dev servers' dynamic config", () => {
  const env = services.temporal.environment as Record<string, string>;
  const mount = (services.temporal.volumes ?? []).map(String).find((v) => v.startsWith('./deploy/temporal-dynamicconfig.yaml:'));
  assert.ok(mount, 'the file is mounted into the temporal service');
  assert.equal(mount.split(':')[1], env.DYNAMIC_CONFIG_FILE_PATH);
  const file = parse(read('deploy/temporal-dynamicconfig.yaml')) as Record<string, { value: unknown }[]>;
  const values = Object.fromEntries(Object.entries(file).map(([key, list]) => [key, list[0]?.value]));
  assert.deepEqual(values, DEFAULT_DYNAMIC_CONFIG);
});

test('every tgs service runs a real `tgs` command with real options', () => {
  const program = buildProgram();
  const tgsServices = Object.entries(services).filter(([, s]) => isTgs(s));
  assert.ok(tgsServices.length >= 6);
  for (const [name, s] of tgsServices) {
    assert.ok(Array.isArray(s.command) && s.command.length > 0, `${name}: command is a list of tgs arguments`);
    assert.deepEqual(checkTgsCommand(s.command as string[], program), [], `${name}: tgs ${(s.command as string[]).join(' ')}`);
  }
  // the checker itself: it refuses what tgs would refuse
  assert.match(checkTgsCommand(['schedulerworker'], program)[0], /not a tgs command/);
  assert.match(checkTgsCommand(['graph'], program)[0], /needs a subcommand/);
  assert.match(checkTgsCommand(['shell-worker', '--worker-type', 'x'], program)[0], /missing required --provisioner-id/);
  assert.match(checkTgsCommand(['api', '--verbose'], program)[0], /unknown option --verbose/);
  assert.match(checkTgsCommand(['graph', 'submit'], program)[0], /needs 1 argument/);
  assert.deepEqual(checkTgsCommand(['graph', 'submit', 'g.yaml', '--wait', '--tail', '5'], program), []);
});

test('the shell worker drains on SIGTERM for --drain-timeout, and its stop_grace_period is a bit above it (Docker never SIGKILLs a draining worker)', () => {
  const worker = services['shell-worker'] as Service & { stop_grace_period?: string };
  const command = worker.command as string[];
  const at = command.indexOf('--drain-timeout');
  assert.ok(at >= 0, `the shell worker is given --drain-timeout: ${command.join(' ')}`);
  const drain = Number(command[at + 1]);
  assert.ok(Number.isInteger(drain) && drain > 0, `--drain-timeout ${command[at + 1]}`);
  const m = /^(\d+)s$/.exec(worker.stop_grace_period ?? '');
  assert.ok(m, `stop_grace_period in seconds: ${worker.stop_grace_period}`);
  const grace = Number(m[1]);
  assert.ok(grace > drain && grace <= drain + 60, `stop_grace_period ${grace}s is a bit above --drain-timeout ${drain}`);
});

test('the variables the tgs services set are ones tgs reads; the shell worker gets no database, broker, Temporal or root secret', () => {
  const readers = ['src/config.ts', 'src/client/credentials.ts'].map(read).join('\n');
  for (const [name, s] of Object.entries(services).filter(([, svc]) => isTgs(svc))) {
    const env = Object.keys(envOf(s));
    if (name !== 'shell-worker') assert.ok(env.includes('DATABASE_URL') && (name === 'tgs-migrate' || env.includes('TEMPORAL_ADDRESS')), `${name} is configured`);
    for (const key of env) {
      const credentialVar = /^(TGS|TASKCLUSTER)_(CLIENT_ID|ACCESS_TOKEN)$/.test(key);
      assert.ok(credentialVar || new RegExp(`\\b${key}\\b`).test(readers), `${name}: ${key} is not a variable tgs reads`);
    }
  }
  // unprivileged, but the shell worker, which runs each task as the task user
  for (const [name, s] of Object.entries(services).filter(([, svc]) => isTgs(svc))) {
    assert.equal(s.user === 'node' && s.cap_drop?.includes('ALL'), name !== 'shell-worker', `${name} runs as ${s.user ?? 'root'}`);
  }
  // the shell worker is root for per-run uids only: no setuid gain, only the capabilities they need, bounded
  const sw = services['shell-worker'] as Service & { security_opt?: string[]; cap_add?: string[]; pids_limit?: number; mem_limit?: string; cpus?: number };
  assert.deepEqual(sw.security_opt, ['no-new-privileges:true']);
  assert.deepEqual(sw.cap_drop, ['ALL']);
  assert.deepEqual([...(sw.cap_add ?? [])].sort(), ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'KILL', 'SETGID', 'SETUID']);
  assert.ok(Number(sw.pids_limit) > 0 && sw.mem_limit && Number(sw.cpus) > 0, 'the shell worker has pids, memory and CPU limits');
  // the root client's token is the API's alone
  for (const [name, s] of Object.entries(services)) assert.equal('TGS_ROOT_ACCESS_TOKEN' in envOf(s), name === 'api', `${name} and the root token`);
  // security review 2026-11-28, info 13: trigger tokens are sealed at rest, with a key the API alone holds
  for (const [name, s] of Object.entries(services)) assert.equal('TGS_HOOK_TOKEN_KEY' in envOf(s), name === 'api', `${name} and the hook token key`);
  assert.match(String(envOf(services.api).TGS_HOOK_TOKEN_KEY), /^\$\{TGS_HOOK_TOKEN_KEY:\?/, 'required from .env');
  assert.match(read('.env.example'), /openssl rand -base64 32\n[\s\S]*^TGS_HOOK_TOKEN_KEY=$/m);
  const workerEnv = Object.keys(envOf(services['shell-worker']));
  for (const key of ['DATABASE_URL', 'AMQP_URL', 'TEMPORAL_ADDRESS', 'TGS_ROOT_ACCESS_TOKEN']) assert.ok(!workerEnv.includes(key), `the shell worker has ${key}`);
});

/** Runs a healthcheck's `node -e` script (as the container would) with its port replaced by `port`; its exit code. */
function checkAgainst(port: number, script: string, fromPort: number): Promise<number | null> {
  const local = script.replace(`127.0.0.1:${fromPort}/`, `127.0.0.1:${port}/`);
  assert.notEqual(local, script, `the script calls 127.0.0.1:${fromPort}: ${script}`);
  return new Promise((resolve) => spawn(process.execPath, ['-e', local], { stdio: 'ignore' }).once('exit', (code) => resolve(code)));
}

test('every long-running tgs service, Postgres, RabbitMQ and Temporal have a health check; tgs ones use node (the image has no curl or wget) on their own endpoint', async () => {
  const dockerfile = read('Dockerfile');
  assert.match(dockerfile, /^FROM node:\d+/m, 'the image has node for the checks');
  assert.deepEqual(services.postgres.healthcheck?.test?.slice(0, 2), ['CMD', 'pg_isready']);
  assert.deepEqual(services.rabbitmq.healthcheck?.test?.slice(0, 2), ['CMD', 'rabbitmq-diagnostics']);
  assert.ok(services.temporal.healthcheck?.test);
  // a stand-in for the process: answers 200 on the one path the check must call, 404 elsewhere
  let expected = '';
  const server = createServer((req, res) => res.writeHead(req.url === expected ? 200 : 404).end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    for (const [name, s] of Object.entries(services).filter(([n, svc]) => isTgs(svc) && !ONE_SHOT.includes(n))) {
      const check = s.healthcheck?.test;
      assert.ok(Array.isArray(check) && check[0] === 'CMD' && check[1] === 'node' && check[2] === '-e', `${name}: a node -e health check`);
      const endpoint = healthEndpoint(s.command as string[], envOf(s));
      assert.ok(!('problem' in endpoint), `${name}: ${'problem' in endpoint ? endpoint.problem : ''}`);
      expected = endpoint.path;
      assert.equal(await checkAgainst(port, (check as string[])[3], endpoint.port), 0, `${name}: its check passes against a process serving ${endpoint.path}`);
      expected = '/elsewhere';
      assert.equal(await checkAgainst(port, (check as string[])[3], endpoint.port), 1, `${name}: its check fails when ${endpoint.path} does not answer 200`);
    }
  } finally {
    server.close();
  }
});
