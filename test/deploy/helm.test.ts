import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { request } from 'node:http';
import { parse, parseAllDocuments } from 'yaml';
import { buildProgram } from '../../src/cli/main.js';
import { IN_FLIGHT_LIMIT_MS } from '../../src/api/gracefulStop.js';
import { ensureHelm } from '../../support/helm.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { startApiProcess } from '../helpers/apiProcess.js';
import { checkTgsCommand, healthEndpoint, kubernetesSecrets, secretProblems } from './deploymentRules.js';

// No Kubernetes cluster here: the chart is linted and rendered by the real helm, and the rendered manifests are
// checked against the same rules as docker-compose.yml (test/deploy/deploymentRules.ts).
const chart = fileURLToPath(new URL('../../deploy/helm/tgs', import.meta.url));
const productionValues = `${chart}/ci/production-values.yaml`;
const program = buildProgram();
let helm: string;

interface Container {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  ports?: { name?: string; containerPort: number }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface PodSpec {
  containers: Container[];
  terminationGracePeriodSeconds?: number;
  automountServiceAccountToken?: boolean;
  enableServiceLinks?: boolean;
}
interface Manifest {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  spec: Record<string, unknown> & {
    replicas?: number;
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    template?: { metadata: { labels: Record<string, string>; annotations?: Record<string, string> }; spec: PodSpec };
  };
}

function run(args: string[]): { status: number | null; output: string } {
  const result = spawnSync(helm, args, { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

function render(...args: string[]): Manifest[] {
  const { status, output } = run(['template', 'rel', chart, ...args]);
  assert.equal(status, 0, `helm template ${args.join(' ')}:\n${output}`);
  return parseAllDocuments(output).map((d) => d.toJS() as Manifest).filter(Boolean);
}

let renders: { name: string; manifests: Manifest[]; values: Record<string, unknown> }[];
before(() => {
  helm = ensureHelm((line) => console.error(`helm.test: ${line}`));
  const production = parse(readFileSync(productionValues, 'utf8')) as Record<string, unknown>;
  renders = [
    { name: 'default values', manifests: render(), values: {} },
    { name: 'default values with the shell worker', manifests: render('--set', 'shellWorker.enabled=true'), values: {} },
    { name: 'production-like values', manifests: render('-f', productionValues), values: production },
  ];
});

const workloads = (manifests: Manifest[]) => manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job');
const podSpec = (m: Manifest) => (m.spec.template as { spec: PodSpec }).spec;
const envOf = (c: Container) => Object.fromEntries((c.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value as string]));
const component = (m: Manifest) => m.spec.template?.metadata.labels['app.kubernetes.io/component'];

test('helm lint --strict passes with the default values and with production-like values', () => {
  for (const args of [[], ['-f', productionValues], ['--set', 'shellWorker.enabled=true']]) {
    const { status, output } = run(['lint', '--strict', chart, ...args]);
    assert.equal(status, 0, `helm lint ${args.join(' ')}:\n${output}`);
  }
});

test('a Deployment per process (api, relay, bridge, scheduler-worker; the shell worker when enabled), each with replicas and a PodDisruptionBudget; the API behind a Service', () => {
  for (const { name, manifests } of renders) {
    const deployments = manifests.filter((m) => m.kind === 'Deployment');
    const expected = ['api', 'relay', 'bridge', 'scheduler-worker', ...(name === 'default values' ? [] : ['shell-worker'])];
    assert.deepEqual(deployments.map(component).sort(), expected.sort(), name);
    for (const d of deployments) {
      assert.ok((d.spec.replicas ?? 0) >= 1, `${name}: ${d.metadata.name} has replicas`);
      const pdb = manifests.find((m) => m.kind === 'PodDisruptionBudget' && JSON.stringify(m.spec.selector?.matchLabels) === JSON.stringify(d.spec.selector?.matchLabels));
      assert.ok(pdb, `${name}: ${d.metadata.name} has a PodDisruptionBudget`);
      assert.deepEqual(d.spec.selector?.matchLabels, Object.fromEntries(Object.entries(d.spec.template?.metadata.labels ?? {}).filter(([k]) => k in (d.spec.selector?.matchLabels ?? {}))));
      assert.equal(podSpec(d).automountServiceAccountToken, false, `${name}: ${d.metadata.name} gets no Kubernetes token`);
      assert.equal(podSpec(d).enableServiceLinks, false, `${name}: ${d.metadata.name} gets no Service addresses in its environment`);
    }
    // the root client's token is the API's alone
    for (const w of workloads(manifests)) {
      const root = podSpec(w).containers[0].env?.some((e) => e.name === 'TGS_ROOT_ACCESS_TOKEN') ?? false;
      assert.ok(!root || component(w) === 'api', `${name}: ${w.metadata.name} gets the root token`);
      // security review 2026-11-28, info 13: trigger tokens sealed at rest, the key from a Secret, the API's alone
      const key = podSpec(w).containers[0].env?.find((e) => e.name === 'TGS_HOOK_TOKEN_KEY');
      assert.ok(!key || component(w) === 'api', `${name}: ${w.metadata.name} gets the hook token key`);
      if (name === 'production-like values' && component(w) === 'api') assert.equal(key?.valueFrom?.secretKeyRef?.name, 'tgs-hook-token-key');
    }
    const service = manifests.find((m) => m.kind === 'Service' && m.metadata.name.endsWith('-api'));
    const api = deployments.find((d) => component(d) === 'api') as Manifest;
    assert.deepEqual(service?.spec.selector, api.spec.selector?.matchLabels, `${name}: the API's Service selects the API's pods`);
    // several APIs, scheduler workers and bridges share the work; relays wait for the active one's lock
    if (name === 'production-like values') for (const d of deployments) assert.ok((d.spec.replicas ?? 0) >= 2, `${d.metadata.name} has a standby or a peer`);
  }
});

test('`tgs migrate` runs as a pre-install/pre-upgrade Job as the owner role; the processes connect as the app role', () => {
  for (const { name, manifests, values } of renders) {
    const job = manifests.find((m) => m.kind === 'Job');
    assert.ok(job, `${name}: the migrate Job`);
    assert.deepEqual(job.metadata.annotations?.['helm.sh/hook']?.split(',').sort(), ['pre-install', 'pre-upgrade']);
    const postgres = { existingSecret: 'tgs-postgres', appUrlKey: 'app-url', ownerUrlKey: 'owner-url', ...(values.postgres as object) };
    const url = (c: Container) => c.env?.find((e) => e.name === 'DATABASE_URL')?.valueFrom?.secretKeyRef;
    assert.deepEqual(url(podSpec(job).containers[0]), { name: postgres.existingSecret, key: postgres.ownerUrlKey });
    for (const d of manifests.filter((m) => m.kind === 'Deployment' && component(m) !== 'shell-worker')) {
      assert.deepEqual(url(podSpec(d).containers[0]), { name: postgres.existingSecret, key: postgres.appUrlKey }, `${d.metadata.name} uses the app role`);
    }
  }
});

test('every container runs a real `tgs` command through the image\'s entrypoint', () => {
  assert.match(readFileSync(new URL('../../Dockerfile', import.meta.url), 'utf8'), /^ENTRYPOINT \["node", "bin\/tgs\.js"\]$/m, 'the image runs tgs: args are its arguments');
  for (const { name, manifests } of renders) {
    for (const w of workloads(manifests)) {
      for (const c of podSpec(w).containers) {
        assert.equal(c.command, undefined, `${name}: ${w.metadata.name} keeps the image's entrypoint`);
        assert.ok(c.args?.length, `${name}: ${w.metadata.name} has args`);
        assert.deepEqual(checkTgsCommand(c.args as string[], program), [], `${name}: ${w.metadata.name}: tgs ${c.args?.join(' ')}`);
      }
    }
  }
});

test('probes point at what each process serves: the API\'s __lbheartbeat__ on its port, /health on the metrics port of the others; the API drains before it stops', () => {
  for (const { name, manifests } of renders) {
    for (const w of manifests.filter((m) => m.kind === 'Deployment')) {
      const c = podSpec(w).containers[0];
      const endpoint = healthEndpoint(c.args as string[], envOf(c));
      assert.ok(!('problem' in endpoint), `${name}: ${w.metadata.name}: ${'problem' in endpoint ? endpoint.problem : ''}`);
      assert.ok(c.livenessProbe, `${name}: ${w.metadata.name} has a liveness probe`);
      for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe].filter(Boolean) as Probe[]) {
        const port = typeof probe.httpGet?.port === 'number' ? probe.httpGet.port : c.ports?.find((p) => p.name === probe.httpGet?.port)?.containerPort;
        assert.deepEqual({ path: probe.httpGet?.path, port }, { path: endpoint.path, port: endpoint.port }, `${name}: ${w.metadata.name}'s probe`);
      }
      if (component(w) === 'api') {
        assert.ok(c.readinessProbe, 'the API has a readiness probe');
        const pause = Number(c.lifecycle?.preStop?.exec?.command.at(-1));
        assert.ok(pause > 0, 'a preStop pause before SIGTERM');
        assert.ok((podSpec(w).terminationGracePeriodSeconds ?? 30) >= pause + IN_FLIGHT_LIMIT_MS / 1000 + 5, 'the grace period covers the pause and the in-flight limit');
      }
    }
  }
});

let db: TestDatabase | undefined;
after(async () => {
  await db?.drop();
});

test('the API\'s readiness probe, sent to a real `tgs api` as kubelet sends it (a new connection each time): 200 while it serves, never 200 once it stops, 503 while it drains', { timeout: 120_000 }, async () => {
  const api = podSpec(renders[0].manifests.find((m) => m.kind === 'Deployment' && component(m) === 'api') as Manifest).containers[0];
  const path = api.readinessProbe?.httpGet?.path as string;
  db = await createTestDatabase();
  const child = await startApiProcess(db.url);
  const port = Number(new URL(child.rootUrl).port);
  const probe = () =>
    new Promise<number | 'refused'>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path, agent: false, headers: { connection: 'close' } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.once('error', () => resolve('refused'));
      req.end();
    });
  assert.equal(await probe(), 200);
  // a client with a connection open keeps the process draining for a while (src/api/gracefulStop.ts)
  const held = request({ host: '127.0.0.1', port, path: '/api/queue/v1/ping-not-served' });
  held.on('error', () => undefined);
  held.flushHeaders();
  child.child.kill('SIGTERM');
  const answers: (number | 'refused')[] = [];
  let exited = false;
  void child.exited.then(() => (exited = true));
  while (!exited && answers.length < 400) {
    answers.push(await probe());
    await new Promise((r) => setTimeout(r, 25));
  }
  held.destroy();
  await child.exited;
  // the first probes may still reach it before the signal is handled; from the first refusal on, none is ready
  const first = answers.findIndex((a) => a !== 200);
  assert.ok(first >= 0, `the probe failed once it stopped: ${answers.join(' ')}`);
  assert.deepEqual(answers.slice(first).filter((a) => a === 200), [], `no 200 after the stop began: ${answers.join(' ')}`);
  assert.ok(answers.includes(503), `a draining API answers the probe 503: ${answers.join(' ')}`);
});

test('the shell worker drains on SIGTERM for --drain-timeout, and its pods\' terminationGracePeriodSeconds is a bit above it (Kubernetes never SIGKILLs a draining worker)', () => {
  const drains: number[] = [];
  for (const { name, manifests } of renders.filter((r) => r.name !== 'default values')) {
    const worker = manifests.find((m) => m.kind === 'Deployment' && component(m) === 'shell-worker') as Manifest;
    const args = podSpec(worker).containers[0].args ?? [];
    const at = args.indexOf('--drain-timeout');
    assert.ok(at >= 0, `${name}: the shell worker is given --drain-timeout: ${args.join(' ')}`);
    const drain = Number(args[at + 1]);
    assert.ok(Number.isInteger(drain) && drain > 0, `${name}: --drain-timeout ${args[at + 1]}`);
    const grace = podSpec(worker).terminationGracePeriodSeconds as number;
    assert.ok(grace > drain && grace <= drain + 60, `${name}: terminationGracePeriodSeconds ${grace} is a bit above --drain-timeout ${drain}`);
    drains.push(drain);
  }
  // the grace follows the value: another drain timeout moves it too
  const other = render('--set', 'shellWorker.enabled=true', '--set', 'shellWorker.drainTimeoutSeconds=45');
  const worker = other.find((m) => m.kind === 'Deployment' && component(m) === 'shell-worker') as Manifest;
  const args = podSpec(worker).containers[0].args ?? [];
  assert.equal(args[args.indexOf('--drain-timeout') + 1], '45');
  assert.equal(podSpec(worker).terminationGracePeriodSeconds, 75);
  assert.ok(drains.length >= 2);
});

test('the NetworkPolicy lets the shell worker\'s pods reach only the API\'s pods on the API\'s port and DNS (plus what the values add)', () => {
  for (const { name, manifests, values } of renders.filter((r) => r.name !== 'default values')) {
    const worker = manifests.find((m) => m.kind === 'Deployment' && component(m) === 'shell-worker') as Manifest;
    const api = manifests.find((m) => m.kind === 'Deployment' && component(m) === 'api') as Manifest;
    const policies = manifests.filter((m) => m.kind === 'NetworkPolicy');
    const policy = policies.find((p) => JSON.stringify((p.spec.podSelector as { matchLabels: unknown }).matchLabels) === JSON.stringify(worker.spec.selector?.matchLabels));
    assert.ok(policy, `${name}: a NetworkPolicy selects the shell worker's pods`);
    assert.ok((policy.spec.policyTypes as string[]).includes('Egress'), 'it restricts egress');
    const egress = policy.spec.egress as { to?: Record<string, { matchLabels: Record<string, string> }>[]; ports?: { port: number; protocol: string }[] }[];
    const apiPort = podSpec(api).containers[0].ports?.find((p) => p.name === 'http')?.containerPort;
    const extra = ((values.networkPolicy as { shellWorkerExtraEgress?: unknown[] } | undefined)?.shellWorkerExtraEgress ?? []) as unknown[];
    assert.equal(egress.length, 2 + extra.length, `${name}: the API, DNS and the values' ${extra.length} rule(s)`);
    assert.deepEqual(egress[0], { to: [{ podSelector: { matchLabels: api.spec.selector?.matchLabels } }], ports: [{ protocol: 'TCP', port: apiPort }] }, 'the API\'s pods on its port');
    assert.deepEqual(egress[1].ports?.map((p) => p.port), [53, 53], 'DNS');
    assert.ok(egress[1].to?.every((t) => t.namespaceSelector && t.podSelector), 'DNS of the cluster\'s DNS pods only');
    assert.deepEqual(egress.slice(2), extra, 'nothing else');
    // and the worker itself holds nothing of the infrastructure
    const env = (podSpec(worker).containers[0].env ?? []).map((e) => e.name);
    for (const key of ['DATABASE_URL', 'AMQP_URL', 'TEMPORAL_ADDRESS', 'TGS_ROOT_ACCESS_TOKEN']) assert.ok(!env.includes(key), `${name}: the shell worker has ${key}`);
    assert.ok(env.includes('TGS_ROOT_URL'));
  }
});

test('no literal secret: every password, token and credential URL comes from a Secret by reference, none is rendered or in the values files', () => {
  for (const { name, manifests } of renders) {
    assert.deepEqual(secretProblems(manifests, kubernetesSecrets), [], name);
    assert.deepEqual(manifests.filter((m) => m.kind === 'Secret').map((m) => m.metadata.name), [], `${name}: the chart makes no Secret`);
    for (const w of workloads(manifests)) {
      for (const e of podSpec(w).containers[0].env ?? []) {
        if (/URL$/.test(e.name) && e.name !== 'TGS_ROOT_URL' && e.name !== 'TGS_TEMPORAL_UI_URL') assert.ok(e.valueFrom?.secretKeyRef, `${name}: ${w.metadata.name}'s ${e.name} comes from a Secret`);
        if (/TOKEN|PASSWORD|API_KEY/.test(e.name)) assert.ok(e.valueFrom?.secretKeyRef, `${name}: ${w.metadata.name}'s ${e.name} comes from a Secret`);
      }
    }
  }
  for (const file of [`${chart}/values.yaml`, productionValues]) assert.deepEqual(secretProblems(parse(readFileSync(file, 'utf8')), kubernetesSecrets), [], file);
  // the rule can fail
  const literal = [{ kind: 'Deployment', spec: { env: [{ name: 'DATABASE_URL', value: 'postgres://tgs:tgs@db/tgs' }, { name: 'RABBITMQ_PASSWORD', value: 'guest' }, { name: 'TGS_ACCESS_TOKEN', value: 'abc' }] } }];
  assert.equal(secretProblems(literal, kubernetesSecrets).length, 3, secretProblems(literal, kubernetesSecrets).join('\n'));
});

test('Prometheus: every pod is annotated for scraping on the metrics port; the ServiceMonitor (when enabled) scrapes it on every tgs pod', () => {
  for (const { name, manifests } of renders) {
    for (const d of manifests.filter((m) => m.kind === 'Deployment')) {
      const annotations = d.spec.template?.metadata.annotations ?? {};
      const c = podSpec(d).containers[0];
      assert.equal(annotations['prometheus.io/scrape'], 'true', `${name}: ${d.metadata.name}`);
      assert.equal(annotations['prometheus.io/port'], envOf(c).TGS_METRICS_PORT);
      assert.equal(c.ports?.find((p) => p.name === 'metrics')?.containerPort, Number(envOf(c).TGS_METRICS_PORT));
    }
  }
  const production = renders[2].manifests;
  const monitor = production.find((m) => m.kind === 'ServiceMonitor');
  assert.ok(monitor, 'production-like values enable the ServiceMonitor');
  const metricsService = production.find((m) => m.kind === 'Service' && JSON.stringify(m.metadata.labels ?? {}).includes('"metrics"'));
  assert.ok(metricsService, 'a Service over the metrics ports');
  for (const d of production.filter((m) => m.kind === 'Deployment')) {
    const labels = d.spec.template?.metadata.labels ?? {};
    assert.ok(Object.entries(metricsService.spec.selector as unknown as Record<string, string>).every(([k, v]) => labels[k] === v), `the metrics Service selects ${d.metadata.name}`);
  }
  assert.equal(renders[0].manifests.find((m) => m.kind === 'ServiceMonitor'), undefined, 'not by default (it needs the Prometheus Operator)');
});
