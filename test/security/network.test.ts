import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { lookup } from 'node:dns/promises';
import { readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { networkInterfaces } from 'node:os';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { startTestTemporal } from '../../support/temporal.js';
import { freePort, type DevServer } from '../../src/temporal/devServer.js';
import { startMetricsServer, type MetricsServer } from '../../src/observability/metricsServer.js';
import { logger } from '../../src/log.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { sandboxScratch } from '../helpers/sandboxScratch.js';
import { startShellWorker, NETWORK_UNSAFE_LINE, type ShellWorker, type ShellWorkerOptions } from '../../src/shellWorker/index.js';
import { startTestShellWorker } from '../helpers/testShellWorker.js';
import { chooseNetwork, findNetworkTools, narrowNetwork, networkUnavailable, type NetworkMode } from '../../src/shellWorker/network.js';
import { probeBwrap } from '../../src/shellWorker/sandbox.js';
import { hawkHeader } from '../../src/client/http.js';

// `tgs shell-worker --network`: a task must reach the tgs API and nothing else of the machine in `api` mode (the
// default), nothing at all in `none`, the internet but never the host's loopback, private ranges or own addresses in
// `internet`, and everything in `host` (which shows the probes can succeed). Each probe is a real TCP connect from a
// real run against the test stack's real Postgres, RabbitMQ, Temporal dev server (every port it listens on: gRPC
// frontend, its HTTP API, the Web UI, its metrics), a process metrics port, a listener on the host's own address,
// and an address outside. The worker runs as root (as CI).

let t: TestApi;
let temporal: DevServer;
let metrics: MetricsServer;
let hostListener: Server;
let scratch: string;
let workDir: string;
const workers: ShellWorker[] = [];
/** name → host:port the probe task tries */
const targets: { name: string; host: string; port: number }[] = [];
/** an address outside (deb.debian.org's), and whether the machine itself reaches it */
let outside: { host: string; reachable: boolean } | undefined;

const tools = findNetworkTools();
const bwrapWorks = probeBwrap({ as: { uid: 1565535, gid: 1565535 } }).ok;

/** Every TCP port process `pid` listens on (its sockets' inodes matched in /proc/net/tcp{,6}). */
function listeningPorts(pid: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[3] === '0A' && inodes.has(f[9])) ports.add(parseInt(f[1].split(':')[1], 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

const tcpReachable = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect({ host, port });
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(3000, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });

before(async () => {
  assert.equal(process.getuid?.(), 0, 'these tests run as root (CI does): modes user and bwrap-as-a-fresh-uid need it');
  t = await startTestApi({ claimWorkWaitMs: 1000 });
  temporal = await startTestTemporal({ uiPort: await freePort() });
  metrics = await startMetricsServer({ port: 0, host: '127.0.0.1', log: logger('test') });
  const hostAddress = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  assert.ok(hostAddress, 'the machine has a non-loopback IPv4 address');
  hostListener = createServer((c) => c.end());
  await new Promise<void>((resolve) => hostListener.listen(0, '0.0.0.0', resolve));
  targets.push(
    { name: 'postgres', host: '127.0.0.1', port: 5432 },
    { name: 'rabbitmq', host: '127.0.0.1', port: 5672 },
    ...listeningPorts(temporal.process.pid as number).map((port) => ({ name: `temporal:${port}${port === temporal.port ? '(grpc)' : port === temporal.uiPort ? '(ui)' : ''}`, host: '127.0.0.1', port })),
    { name: 'metrics', host: '127.0.0.1', port: metrics.port },
    { name: 'host-address', host: hostAddress, port: (hostListener.address() as { port: number }).port },
    { name: 'metadata', host: '169.254.169.254', port: 80 },
  );
  assert.ok(targets.some((x) => x.name.endsWith('(grpc)')) && targets.some((x) => x.name.endsWith('(ui)')), JSON.stringify(targets));
  for (const target of targets.filter((x) => x.name !== 'metadata')) assert.ok(await tcpReachable(target.host, target.port), `${target.name} answers the worker`);
  try {
    const { address } = await lookup('deb.debian.org', { family: 4 });
    outside = { host: address, reachable: await tcpReachable(address, 80) };
  } catch {
    outside = undefined;
  }
  console.log(`# outside address: ${outside ? `${outside.host}:80, ${outside.reachable ? 'reachable' : 'NOT reachable'} from this machine` : 'deb.debian.org does not resolve here: no outside probe'}`);
  if (outside) targets.push({ name: 'outside', host: outside.host, port: 80 });
  ({ scratch, workDir } = sandboxScratch('tgs-network-'));
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t?.close();
  await temporal?.stop();
  await metrics?.close();
  hostListener?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function worker(workerType: string, isolation: 'bwrap' | 'user', network: NetworkMode | undefined, extra: Partial<ShellWorkerOptions> = {}): { lines: string[] } {
  const { worker: w, lines } = startTestShellWorker(t, workerType, { workDir, isolation, network, ...extra });
  workers.push(w);
  return { lines };
}

/**
 * The probe: a TCP connect to each target (3 s), then GET ping, a task's status and (Hawk-signed, by the test, for
 * the root URL's host and port) currentScopes from the API at TASKCLUSTER_ROOT_URL; prints `PROBE <name> ok` or
 * `PROBE <name> <status or error code>`. A 200 for the signed call shows the relay keeps what Hawk signs.
 */
const PROBE_JS = `
const net = require('net');
const targets = JSON.parse(process.env.PROBES);
const one = (t) => new Promise((resolve) => {
  const s = net.connect({ host: t.host, port: t.port });
  const done = (r) => { s.destroy(); resolve(r); };
  s.setTimeout(3000, () => done('ETIMEDOUT'));
  s.once('connect', () => done('ok'));
  s.once('error', (e) => done(e.code || e.message));
});
(async () => {
  for (const t of targets) console.log('PROBE ' + t.name + ' ' + (await one(t)));
  for (const [name, p, auth] of [['api-ping', '/api/queue/v1/ping'], ['api-status', '/api/queue/v1/task/' + process.env.TASK_ID + '/status'], ['api-hawk', '/api/auth/v1/scopes/current', process.env.HAWK]]) {
    const r = await fetch(process.env.TASKCLUSTER_ROOT_URL + p, { headers: auth ? { authorization: auth } : {}, signal: AbortSignal.timeout(5000) }).then((res) => String(res.status), (e) => (e.cause && e.cause.code) || e.name);
    console.log('PROBE ' + name + ' ' + r);
  }
  console.log('PROBE-ROOT-URL ' + process.env.TASKCLUSTER_ROOT_URL);
})();
`;

async function probe(workerType: string, payloadExtra: Record<string, unknown> = {}): Promise<{ state: string; log: string; results: Record<string, string> }> {
  // signed now, used once within seconds (Hawk allows 60 s of skew)
  const hawk = hawkHeader(`${t.rootUrl}/api/auth/v1/scopes/current`, 'GET', t.root);
  const taskId = await createTestTask(t, workerType, { command: ['node', '-e', PROBE_JS], env: { PROBES: JSON.stringify(targets), HAWK: hawk }, maxRunTime: 120, ...payloadExtra });
  const s = await eventually(async () => {
    const st = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
    return ['completed', 'failed', 'exception'].includes(st.state) && st;
  }, `task ${taskId} resolved`, 120_000);
  const log = await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/logs/live.log`).then((r) => r.text());
  const results = Object.fromEntries([...log.matchAll(/^PROBE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
  return { state: s.state, log, results };
}

const loopbackServices = () => targets.filter((x) => x.host === '127.0.0.1').map((x) => x.name);

function assertReport(mode: string, results: Record<string, string>, log: string) {
  console.log(`# ${mode}: ${Object.entries(results).map(([k, v]) => `${k}=${v}`).join(' ')}`);
  for (const target of targets) assert.ok(target.name in results, `${mode}: ${target.name} was probed\n${log}`);
}

const ISOLATIONS = ['bwrap', 'user'] as const;
const MODES: NetworkMode[] = ['api', 'none', 'internet', 'host'];

for (const isolation of ISOLATIONS) {
  for (const mode of MODES) {
    test(`${isolation} + --network ${mode}: what a run reaches`, async () => {
      const cannot = isolation === 'bwrap' && !bwrapWorks ? 'bubblewrap does not work here' : networkUnavailable(mode, { isolation, root: true, tools });
      if (cannot) {
        // not a skip: the machine's refusal is the result, and it says so
        console.log(`# this machine could not give ${isolation} + --network ${mode}: ${cannot}`);
        assert.throws(() => startShellWorker({ rootUrl: t.rootUrl, provisionerId: 'tgs-test', workerType: 'never', capacity: 1, isolation, network: mode }), /apt-get install|bubblewrap/);
        return;
      }
      const workerType = `net-${isolation}-${mode}`;
      const { lines } = worker(workerType, isolation, mode);
      const { state, log, results } = await probe(workerType);
      assertReport(`${isolation}/${mode}`, results, log);
      assert.equal(state, 'completed', log);
      assert.match(log, new RegExp(`^PROBE-ROOT-URL ${t.rootUrl}$`, 'm'), 'the task names the API by its root URL');
      if (mode === 'host') {
        assert.equal(lines.filter((l) => l === NETWORK_UNSAFE_LINE).length, 1, lines.join('\n'));
        for (const name of [...loopbackServices(), 'host-address', 'api-ping']) assert.ok(['ok', '200'].includes(results[name]), `host: ${name} is reachable (the probes can succeed): ${results[name]}`);
        return;
      }
      assert.ok(lines.some((l) => l.includes(`network ${mode}: a namespace of its own`)), lines.join('\n'));
      // nothing on the host's loopback: inside the namespace nothing listens there (refused), or it is not routed
      for (const name of loopbackServices()) assert.notEqual(results[name], 'ok', `${isolation}/${mode}: ${name} must not be reachable`);
      assert.notEqual(results['host-address'], 'ok', `${isolation}/${mode}: the host's own address must not be reachable`);
      assert.notEqual(results.metadata, 'ok');
      if (mode === 'api') {
        assert.equal(results['api-ping'], '200', log);
        assert.equal(results['api-status'], '200', log);
        assert.equal(results['api-hawk'], '200', `a Hawk-signed request through the relay authenticates\n${log}`);
        if (outside) assert.equal(results.outside, 'ENETUNREACH', 'no route out of an api namespace');
      } else if (mode === 'none') {
        assert.notEqual(results['api-ping'], '200', log);
        if (outside) assert.equal(results.outside, 'ENETUNREACH');
      } else {
        // internet: the private ranges and the host's addresses are routed to prohibit (EACCES at once)
        assert.equal(results['host-address'], 'EACCES', log);
        assert.equal(results.metadata, 'EACCES', log);
        assert.notEqual(results['api-ping'], '200', 'the API on the host\'s loopback is not reachable either (internet is not api)');
        if (outside?.reachable) assert.equal(results.outside, 'ok', `internet: the outside address is reachable\n${log}`);
        else console.log('# this machine reaches no outside address: internet mode\'s outside probe only shows it is not prohibited');
        if (outside) assert.notEqual(results.outside, 'EACCES');
      }
    });
  }
}

test('a payload may narrow the network, never widen it', async () => {
  const isolation = bwrapWorks ? 'bwrap' : 'user';
  worker('net-narrow', isolation, 'internet');
  const narrowed = await probe('net-narrow', { network: 'api' });
  assert.equal(narrowed.state, 'completed', narrowed.log);
  assert.equal(narrowed.results['api-ping'], '200', narrowed.log);
  if (outside) assert.equal(narrowed.results.outside, 'ENETUNREACH', narrowed.log);

  worker('net-widen', isolation, 'api');
  const widened = await probe('net-widen', { network: 'host' });
  assert.equal(widened.state, 'exception', widened.log);
  assert.match(widened.log, /payload\.network "host" is wider than this worker gives \(--network api\)/);
  assert.doesNotMatch(widened.log, /^PROBE /m, 'nothing ran');
});

test('chooseNetwork: api by default, refusals that name what to install, tgs dev\'s fallback', () => {
  const all = { unshare: '/usr/bin/unshare', setpriv: '/usr/bin/setpriv', nsenter: '/usr/bin/nsenter', ip: '/usr/sbin/ip', slirp4netns: '/usr/bin/slirp4netns' };
  assert.equal(chooseNetwork(undefined, { isolation: 'bwrap', root: false, tools: {} }).mode, 'api');
  assert.equal(chooseNetwork(undefined, { isolation: 'user', root: true, tools: all }).mode, 'api');
  assert.throws(() => chooseNetwork('internet', { isolation: 'bwrap', root: true, tools: { ...all, slirp4netns: undefined } }), /^Error: --network internet: slirp4netns is missing on this machine: apt-get install slirp4netns/);
  assert.throws(() => chooseNetwork(undefined, { isolation: 'user', root: true, tools: { setpriv: all.setpriv } }), /unshare, ip are missing on this machine: apt-get install util-linux iproute2/);
  assert.throws(() => chooseNetwork(undefined, { isolation: 'none', root: false, tools: all }), /needs a root worker.*--isolation bwrap \(apt-get install bubblewrap\)/);
  assert.equal(chooseNetwork(undefined, { isolation: 'none', root: false, tools: all }, { fallbackToHost: true }).mode, 'host');
  // a root worker in a container without CAP_SYS_ADMIN: unshare fails when tried at start
  assert.throws(() => chooseNetwork('api', { isolation: 'user', root: true, tools: all, unshareFails: 'unshare: unshare failed: Operation not permitted' }), /cannot make a network namespace \(unshare: unshare failed: Operation not permitted\): give its container CAP_SYS_ADMIN, use --isolation bwrap, or pass --network host/);
  assert.equal(chooseNetwork('api', { isolation: 'bwrap', root: true, tools: all, unshareFails: 'x' }).mode, 'api');
  assert.equal(chooseNetwork('host', { isolation: 'none', root: false, tools: {} }).mode, 'host');
  assert.throws(() => chooseNetwork('lan' as NetworkMode, { isolation: 'bwrap', root: true, tools: all }), /give api, internet, none or host/);
  assert.deepEqual(narrowNetwork('internet', 'none'), { mode: 'none' });
  assert.deepEqual(narrowNetwork('api', undefined), { mode: 'api' });
  assert.ok('error' in narrowNetwork('none', 'api'));
});

test('--network api with a root URL on an address other than loopback refuses to start with the fix', () => {
  assert.throws(
    () => startShellWorker({ rootUrl: 'http://10.1.2.3:8080', provisionerId: 'tgs-test', workerType: 'never', capacity: 1, network: 'api' }),
    /--network api: the API's root URL http:\/\/10\.1\.2\.3:8080 is an address \(10\.1\.2\.3\) that a run's network namespace cannot hold; give TGS_ROOT_URL with a host name/,
  );
});
