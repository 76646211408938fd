import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { Command, Option } from 'commander';
import { parse } from 'yaml';
import { buildProgram } from '../../src/cli/main.js';
import { DEFAULT_DYNAMIC_CONFIG } from '../../src/temporal/devServer.js';

// docker compose cannot run here: these checks are what can be checked without it.
const text = readFileSync(new URL('../../docker-compose.yml', import.meta.url), 'utf8');
// YAML merge keys (`<<: *tgs`) as docker compose applies them
const compose = parse(text, { merge: true }) as { services: Record<string, Service> };

interface Service {
  image?: string;
  build?: unknown;
  command?: string[] | string;
  depends_on?: string[] | Record<string, unknown>;
  network_mode?: string;
  environment?: Record<string, string> | string[];
  ports?: string[];
  volumes?: string[];
  healthcheck?: { test?: string[] | string; interval?: string; timeout?: string; retries?: number };
}

const services = compose.services;
const isTgs = (s: Service) => s.build === '.' || s.image?.startsWith('tgs:') === true;
const dependsOn = (s: Service) => (Array.isArray(s.depends_on) ? s.depends_on : Object.keys(s.depends_on ?? {}));

/**
 * Checks `tgs <args>` against the real commander program: each word names a (sub)command, the last one has no
 * subcommands, every --option exists on it (skipping its value), required options and arguments are given.
 */
function checkTgsCommand(program: Command, args: string[]): string[] {
  const problems: string[] = [];
  let cmd = program;
  let i = 0;
  for (; i < args.length && !args[i].startsWith('-'); i++) {
    const sub = cmd.commands.find((c) => c.name() === args[i] || c.aliases().includes(args[i]));
    if (!sub) break;
    cmd = sub;
  }
  const path = args.slice(0, i).join(' ');
  if (cmd === program) return [`"${args[0]}" is not a tgs command (${program.commands.map((c) => c.name()).join(', ')})`];
  if (cmd.commands.length > 0) return [`tgs ${path} needs a subcommand (${cmd.commands.map((c) => c.name()).join(', ')})`];
  const options = cmd.options as Option[];
  const given = new Set<string>();
  const positionals: string[] = [];
  for (; i < args.length; i++) {
    const word = args[i];
    if (!word.startsWith('-')) {
      positionals.push(word);
      continue;
    }
    const [flag, inline] = word.split('=', 2);
    const option = options.find((o) => o.long === flag || o.short === flag);
    if (!option) {
      problems.push(`tgs ${path}: unknown option ${flag}`);
      continue;
    }
    given.add(option.long as string);
    if ((option.required || option.optional) && inline === undefined) i++;
  }
  for (const o of options) if (o.mandatory && !given.has(o.long as string)) problems.push(`tgs ${path}: missing required ${o.long}`);
  const required = cmd.registeredArguments.filter((a) => a.required).length;
  if (positionals.length < required) problems.push(`tgs ${path}: needs ${required} argument(s), got ${positionals.length}`);
  if (positionals.length > cmd.registeredArguments.length && !cmd.registeredArguments.at(-1)?.variadic) {
    problems.push(`tgs ${path}: too many arguments (${positionals.join(' ')})`);
  }
  return problems;
}

test('docker-compose.yml parses and has the deployment: Postgres, RabbitMQ with its management UI, Temporal with its Web UI, the tgs processes', () => {
  for (const name of ['postgres', 'rabbitmq', 'temporal', 'temporal-ui', 'api', 'relay', 'bridge', 'scheduler-worker', 'shell-worker']) {
    assert.ok(services[name], `service ${name}`);
  }
  assert.match(services.rabbitmq.image ?? '', /management/);
  assert.ok(services.rabbitmq.ports?.some((p) => p.endsWith(':15672')), 'management UI port published');
  assert.match(services['temporal-ui'].image ?? '', /^temporalio\/ui:/);
  assert.ok(services.api.ports?.some((p) => p.endsWith(':8080')));
  for (const name of ['api', 'relay', 'bridge', 'scheduler-worker', 'shell-worker']) assert.ok(isTgs(services[name]), `${name} runs the tgs image`);
});

test('Temporal and its Web UI are published on the loopback interface only (Temporal access controls every graph)', () => {
  for (const name of ['temporal', 'temporal-ui']) {
    for (const port of services[name].ports ?? []) {
      // short syntax: [IP:]HOST:CONTAINER — without an IP, Docker binds every interface
      const parts = String(port).split(':');
      assert.ok(parts.length === 3 && ['127.0.0.1', '[::1]'].includes(parts[0]), `${name} publishes ${port} beyond 127.0.0.1`);
    }
  }
  assert.ok(services.temporal.ports?.includes('127.0.0.1:7233:7233'), 'the temporal CLI on the host still reaches 127.0.0.1:7233');
});

test("the Temporal server reads deploy/temporal-dynamicconfig.yaml, which holds exactly the dev servers' dynamic config", () => {
  const env = services.temporal.environment as Record<string, string>;
  const mount = (services.temporal.volumes ?? []).map(String).find((v) => v.startsWith('./deploy/temporal-dynamicconfig.yaml:'));
  assert.ok(mount, 'the file is mounted into the temporal service');
  // auto-setup resolves DYNAMIC_CONFIG_FILE_PATH against /etc/temporal
  assert.equal(mount.split(':')[1], `/etc/temporal/${env.DYNAMIC_CONFIG_FILE_PATH}`);
  const file = parse(readFileSync(new URL('../../deploy/temporal-dynamicconfig.yaml', import.meta.url), 'utf8')) as Record<string, { value: unknown }[]>;
  const values = Object.fromEntries(Object.entries(file).map(([key, list]) => [key, list[0]?.value]));
  assert.deepEqual(values, DEFAULT_DYNAMIC_CONFIG);
});

test('every depends_on and network_mode names a service of the file', () => {
  const names = new Set(Object.keys(services));
  for (const [name, s] of Object.entries(services)) {
    for (const dep of dependsOn(s)) assert.ok(names.has(dep), `${name} depends on unknown service ${dep}`);
    const shared = /^service:(.+)$/.exec(s.network_mode ?? '')?.[1];
    if (shared) {
      assert.ok(names.has(shared), `${name} shares the network of unknown service ${shared}`);
      assert.ok(dependsOn(s).includes(shared), `${name} must depend on ${shared}, whose network it uses`);
    }
  }
});

test('every tgs service runs a real `tgs` command with real options', () => {
  const program = buildProgram();
  const tgsServices = Object.entries(services).filter(([, s]) => isTgs(s));
  assert.ok(tgsServices.length >= 5);
  for (const [name, s] of tgsServices) {
    assert.ok(Array.isArray(s.command) && s.command.length > 0, `${name}: command is a list of tgs arguments`);
    assert.deepEqual(checkTgsCommand(program, s.command as string[]), [], `${name}: tgs ${(s.command as string[]).join(' ')}`);
  }
  // the checker itself: it refuses what tgs would refuse
  assert.match(checkTgsCommand(program, ['schedulerworker'])[0], /not a tgs command/);
  assert.match(checkTgsCommand(program, ['graph'])[0], /needs a subcommand/);
  assert.match(checkTgsCommand(program, ['shell-worker', '--worker-type', 'x'])[0], /missing required --provisioner-id/);
  assert.match(checkTgsCommand(program, ['api', '--verbose'])[0], /unknown option --verbose/);
  assert.match(checkTgsCommand(program, ['graph', 'submit'])[0], /needs 1 argument/);
  assert.deepEqual(checkTgsCommand(program, ['graph', 'submit', 'g.yaml', '--wait', '--tail', '5']), []);
});

test('the variables the tgs services set are ones tgs reads', () => {
  const readers = ['../../src/config.ts', '../../src/client/credentials.ts'].map((f) => readFileSync(new URL(f, import.meta.url), 'utf8')).join('\n');
  for (const [name, s] of Object.entries(services).filter(([, svc]) => isTgs(svc))) {
    const env = Array.isArray(s.environment) ? s.environment.map((e) => e.split('=')[0]) : Object.keys(s.environment ?? {});
    assert.ok(env.includes('DATABASE_URL') && env.includes('TEMPORAL_ADDRESS'), `${name} is configured`);
    for (const key of env) {
      const credentialVar = /^(TGS|TASKCLUSTER)_(CLIENT_ID|ACCESS_TOKEN)$/.test(key);
      assert.ok(credentialVar || new RegExp(`\\b${key}\\b`).test(readers), `${name}: ${key} is not a variable tgs reads`);
    }
  }
  // the worker reaches the API at the root URL artifact upload URLs are built from
  assert.equal(services['shell-worker'].network_mode, 'service:api');
});

const envOf = (s: Service): Record<string, string> =>
  Array.isArray(s.environment) ? Object.fromEntries(s.environment.map((e) => e.split('=', 2) as [string, string])) : (s.environment ?? {});

/** Runs a healthcheck's `node -e` script (as the container would) with its port replaced by `port`; its exit code. */
function checkAgainst(port: number, script: string, fromPort: string): Promise<number | null> {
  const local = script.replace(`127.0.0.1:${fromPort}/`, `127.0.0.1:${port}/`);
  assert.notEqual(local, script, `the script calls 127.0.0.1:${fromPort}: ${script}`);
  return new Promise((resolve) => spawn(process.execPath, ['-e', local], { stdio: 'ignore' }).once('exit', (code) => resolve(code)));
}

test('every tgs service, Postgres and RabbitMQ have a health check; tgs ones use node (the image has no curl or wget) on their own endpoint', async () => {
  const dockerfile = readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8');
  assert.match(dockerfile, /^FROM node:\d+/m, 'the image has node for the checks');
  assert.deepEqual(services.postgres.healthcheck?.test?.slice(0, 2), ['CMD', 'pg_isready']);
  assert.deepEqual(services.rabbitmq.healthcheck?.test?.slice(0, 2), ['CMD', 'rabbitmq-diagnostics']);
  // a stand-in for the process: answers 200 on the one path the check must call, 404 elsewhere
  let expected = '';
  const server = createServer((req, res) => res.writeHead(req.url === expected ? 200 : 404).end());
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  try {
    for (const [name, s] of Object.entries(services).filter(([, svc]) => isTgs(svc))) {
      const check = s.healthcheck?.test;
      assert.ok(Array.isArray(check) && check[0] === 'CMD' && check[1] === 'node' && check[2] === '-e', `${name}: a node -e health check`);
      const env = envOf(s);
      const [checkPort, path] = name === 'api' ? [env.PORT ?? '8080', '/api/queue/v1/__lbheartbeat__'] : [env.TGS_METRICS_PORT, '/health'];
      assert.ok(checkPort, `${name}: TGS_METRICS_PORT is set, so its /health is served`);
      expected = path;
      assert.equal(await checkAgainst(port, (check as string[])[3], checkPort), 0, `${name}: its check passes against a process serving ${path}`);
      expected = '/elsewhere';
      assert.equal(await checkAgainst(port, (check as string[])[3], checkPort), 1, `${name}: its check fails when ${path} does not answer 200`);
    }
  } finally {
    server.close();
  }
  // services sharing a network namespace must not share a metrics port
  const shared = services['shell-worker'].network_mode?.replace(/^service:/, '') ?? '';
  assert.notEqual(envOf(services['shell-worker']).TGS_METRICS_PORT, envOf(services[shared]).TGS_METRICS_PORT);
});
