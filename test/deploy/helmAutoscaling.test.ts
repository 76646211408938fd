import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { registry } from '../../src/observability/metrics.js';
import { ensureHelm } from '../../support/helm.js';

// The shell worker's optional KEDA ScaledObject (docs/deployments.md § Autoscaling shell workers). No cluster and no
// KEDA here: the rendered object is checked against the ScaledObject rules KEDA documents (validateScaledObject) and
// its triggers against what tgs serves and exports.
const chart = fileURLToPath(new URL('../../deploy/helm/tgs', import.meta.url));
const productionValues = `${chart}/ci/production-values.yaml`;
let helm: string;

interface Trigger {
  type: string;
  name?: string;
  metadata: Record<string, string>;
}
interface ScaledObjectSpec {
  scaleTargetRef: { apiVersion?: string; kind?: string; name: string };
  minReplicaCount?: number;
  maxReplicaCount?: number;
  pollingInterval?: number;
  cooldownPeriod?: number;
  advanced?: {
    scalingModifiers?: { formula: string; target: string; activationTarget?: string; metricType?: string };
    horizontalPodAutoscalerConfig?: { behavior?: unknown };
  };
  triggers: Trigger[];
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: Record<string, unknown>;
}

function run(args: string[]): { status: number | null; output: string } {
  const result = spawnSync(helm, args, { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

function render(...args: string[]): Manifest[] {
  const { status, output } = run(['template', 'rel', chart, '--namespace', 'ci', ...args]);
  assert.equal(status, 0, `helm template ${args.join(' ')}:\n${output}`);
  return parseAllDocuments(output).map((d) => d.toJS() as Manifest).filter(Boolean);
}

const autoscaled = ['--set', 'shellWorker.enabled=true', '--set', 'shellWorker.autoscaling.enabled=true'];
const withPrometheus = [...autoscaled, '--set', 'shellWorker.autoscaling.trigger=prometheus', '--set', 'shellWorker.autoscaling.prometheus.serverAddress=http://prometheus-operated.monitoring.svc:9090'];
const scaledObjects = (manifests: Manifest[]) => manifests.filter((m) => m.kind === 'ScaledObject');
const shellWorker = (manifests: Manifest[]) => manifests.find((m) => m.kind === 'Deployment' && m.metadata.labels?.['app.kubernetes.io/component'] === 'shell-worker') as Manifest;
const values = parse(readFileSync(`${chart}/values.yaml`, 'utf8')) as { shellWorker: { capacity: number; provisionerId: string; workerType: string; autoscaling: Record<string, unknown> } };

/**
 * The rules of KEDA's ScaledObject (keda.sh/v1alpha1) the chart's object relies on, written down from KEDA's
 * documentation of the ScaledObject spec and its admission webhook: a target Deployment by name, triggers with a
 * type and string metadata, triggers named and their names unique when `scalingModifiers` composes them, a formula
 * and a numeric target above 0, a metric type KEDA knows, and min ≤ max replicas.
 */
let validateScaledObject: (m: Manifest) => string[];
before(() => {
  helm = ensureHelm((line) => console.error(`helmAutoscaling.test: ${line}`));
  validateScaledObject = (m) => {
    const problems: string[] = [];
    const spec = m.spec as unknown as ScaledObjectSpec;
    if (m.apiVersion !== 'keda.sh/v1alpha1' || m.kind !== 'ScaledObject') problems.push(`apiVersion/kind ${m.apiVersion}/${m.kind}`);
    if (!m.metadata?.name) problems.push('metadata.name');
    if (typeof spec?.scaleTargetRef?.name !== 'string' || spec.scaleTargetRef.name === '') problems.push('spec.scaleTargetRef.name');
    if (!Array.isArray(spec?.triggers) || spec.triggers.length === 0) problems.push('spec.triggers must not be empty');
    for (const [i, t] of (spec?.triggers ?? []).entries()) {
      if (typeof t.type !== 'string' || t.type === '') problems.push(`/spec/triggers/${i}/type`);
      for (const [k, v] of Object.entries(t.metadata ?? {})) if (typeof v !== 'string') problems.push(`/spec/triggers/${i}/metadata/${k} must be a string`);
    }
    for (const n of ['minReplicaCount', 'maxReplicaCount', 'pollingInterval', 'cooldownPeriod'] as const) {
      if (spec?.[n] !== undefined && (!Number.isInteger(spec[n]) || (spec[n] as number) < 0)) problems.push(`/spec/${n} must be a whole number ≥ 0`);
    }
    if (spec?.minReplicaCount !== undefined && spec.minReplicaCount > (spec.maxReplicaCount ?? 100)) problems.push('minReplicaCount must be less than or equal to maxReplicaCount');
    const modifiers = spec?.advanced?.scalingModifiers;
    if (modifiers) {
      const names = spec.triggers.map((t) => t.name);
      if (names.some((n) => !n) || new Set(names).size !== names.length) problems.push('scalingModifiers needs every trigger named, each name once');
      if (!modifiers.formula) problems.push('scalingModifiers.formula');
      if (!(Number(modifiers.target) > 0)) problems.push('scalingModifiers.target must be a number above 0');
      if (modifiers.metricType !== undefined && !['AverageValue', 'Value'].includes(modifiers.metricType)) problems.push(`scalingModifiers.metricType ${modifiers.metricType}`);
    }
    return problems;
  };
});

test('no ScaledObject by default, with the shell worker alone, or with autoscaling but no shell worker; the shell worker\'s Deployment then sets replicas', () => {
  assert.equal(values.shellWorker.autoscaling.enabled, false, 'off by default');
  for (const args of [[], ['--set', 'shellWorker.enabled=true'], ['--set', 'shellWorker.autoscaling.enabled=true'], ['-f', productionValues]]) {
    const manifests = render(...args);
    assert.deepEqual(scaledObjects(manifests), [], `helm template ${args.join(' ')}`);
    const worker = shellWorker(manifests);
    if (worker) assert.ok((worker.spec.replicas as number) >= 1, `${args.join(' ')}: the shell worker has replicas`);
  }
});

test('metrics-api: a valid ScaledObject on the shell worker\'s Deployment, whose demand is pending + claimed tasks of its task queue from taskQueueCounts on the API\'s Service; the Deployment leaves replicas to it', () => {
  const manifests = render(...autoscaled);
  const [so, ...more] = scaledObjects(manifests);
  assert.ok(so && more.length === 0, 'one ScaledObject');
  assert.deepEqual(validateScaledObject(so), [], 'valid as KEDA documents a ScaledObject');
  const spec = so.spec as unknown as ScaledObjectSpec;
  const worker = shellWorker(manifests);
  assert.deepEqual(spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: worker.metadata.name });
  assert.equal(worker.spec.replicas, undefined, 'KEDA\'s HPA owns replicas: the Deployment does not set them');
  const a = values.shellWorker.autoscaling;
  assert.deepEqual([spec.minReplicaCount, spec.maxReplicaCount, spec.pollingInterval, spec.cooldownPeriod], [a.minReplicas, a.maxReplicas, a.pollingInterval, a.cooldownPeriod]);

  // taskQueueCounts answers {taskQueueId, pendingTasks, claimedTasks}: one metrics-api trigger reads one number, so
  // one trigger per field, summed by the formula into the metric the HPA divides by the target (AverageValue)
  const counts = { taskQueueId: 'tgs-dev/shell', pendingTasks: 7, claimedTasks: 5 };
  const service = manifests.find((m) => m.kind === 'Service' && m.metadata.name === 'rel-tgs-api') as Manifest;
  const port = (service.spec.ports as { port: number }[])[0].port;
  const url = `http://${service.metadata.name}.ci.svc${port === 80 ? '' : `:${port}`}/api/queue/v1/task-queues/tgs-dev%2Fshell/counts`;
  assert.deepEqual(spec.triggers.map((t) => t.type), ['metrics-api', 'metrics-api']);
  const read: Record<string, number> = {};
  for (const t of spec.triggers) {
    assert.equal(t.metadata.url, url, `${t.name}: taskQueueCounts of the shell worker's task queue, on the API's Service`);
    assert.equal(new URL(t.metadata.url).pathname.split('/')[5], encodeURIComponent(counts.taskQueueId), 'the taskQueueId is one path segment');
    assert.equal(t.metadata.format, 'json');
    // a top-level field: the GJSON path is the field's name
    const value = (counts as Record<string, unknown>)[t.metadata.valueLocation];
    assert.equal(typeof value, 'number', `${t.name}: valueLocation ${t.metadata.valueLocation} is a number of the answer`);
    read[t.name as string] = value as number;
  }
  assert.deepEqual(Object.values(read).sort(), [counts.claimedTasks, counts.pendingTasks].sort(), 'one trigger reads pendingTasks, the other claimedTasks');
  const modifiers = spec.advanced?.scalingModifiers;
  assert.ok(modifiers, 'scalingModifiers compose them');
  assert.deepEqual(modifiers.formula.match(/[A-Za-z_]\w*/g)?.sort(), Object.keys(read).sort(), 'the formula names each trigger');
  assert.equal(modifiers.formula.replace(/[A-Za-z_]\w*/g, (n) => String(read[n])).replace(/\s/g, ''), `${read.pending}+${read.claimed}`, 'pending + claimed');
  assert.equal(modifiers.metricType, 'AverageValue', 'per replica');
  assert.equal(modifiers.target, String(values.shellWorker.capacity), 'the target defaults to the worker\'s capacity');
});

test('the values reach the ScaledObject: target, replicas, intervals, the HPA\'s behavior, a public API URL, the pool of production-like values', () => {
  const [so] = scaledObjects(render(...autoscaled, '--set', 'shellWorker.autoscaling.targetTasksPerWorker=2', '--set', 'shellWorker.autoscaling.minReplicas=0',
    '--set', 'shellWorker.autoscaling.maxReplicas=30', '--set', 'shellWorker.autoscaling.pollingInterval=15', '--set', 'shellWorker.autoscaling.cooldownPeriod=600',
    '--set', 'shellWorker.autoscaling.behavior.scaleDown.stabilizationWindowSeconds=900', '--set', 'shellWorker.autoscaling.metricsApi.url=https://tgs.example.com/'));
  assert.deepEqual(validateScaledObject(so), []);
  const spec = so.spec as unknown as ScaledObjectSpec;
  assert.deepEqual([spec.minReplicaCount, spec.maxReplicaCount, spec.pollingInterval, spec.cooldownPeriod], [0, 30, 15, 600]);
  assert.equal(spec.advanced?.scalingModifiers?.target, '2');
  assert.deepEqual(spec.advanced?.horizontalPodAutoscalerConfig?.behavior, { scaleDown: { stabilizationWindowSeconds: 900 } });
  for (const t of spec.triggers) assert.equal(t.metadata.url, 'https://tgs.example.com/api/queue/v1/task-queues/tgs-dev%2Fshell/counts');

  const production = render('-f', productionValues, '--set', 'shellWorker.autoscaling.enabled=true');
  const [prod] = scaledObjects(production);
  assert.deepEqual(validateScaledObject(prod), []);
  const prodSpec = prod.spec as unknown as ScaledObjectSpec;
  assert.equal(prodSpec.advanced?.scalingModifiers?.target, '8', 'its capacity');
  for (const t of prodSpec.triggers) assert.match(t.metadata.url, /^http:\/\/rel-tgs-api\.ci\.svc\/api\/queue\/v1\/task-queues\/prod%2Fshell\/counts$/, 'the Service, not the public root URL');
  assert.equal(shellWorker(production).spec.replicas, undefined);
  assert.equal(prodSpec.scaleTargetRef.name, shellWorker(production).metadata.name);
});

test('prometheus: the pending gauge the API exports for the shell worker\'s pool (max over API replicas), against the values\' Prometheus', () => {
  const manifests = render(...withPrometheus);
  const [so] = scaledObjects(manifests);
  assert.deepEqual(validateScaledObject(so), []);
  const spec = so.spec as unknown as ScaledObjectSpec;
  assert.equal(spec.scaleTargetRef.name, shellWorker(manifests).metadata.name);
  assert.equal(shellWorker(manifests).spec.replicas, undefined);
  assert.equal(spec.advanced, undefined, 'one trigger: no scalingModifiers');
  assert.equal(spec.triggers.length, 1);
  const [t] = spec.triggers;
  assert.equal(t.type, 'prometheus');
  assert.equal(t.metadata.serverAddress, 'http://prometheus-operated.monitoring.svc:9090');
  assert.equal(t.metadata.threshold, String(values.shellWorker.capacity));
  const query = /^max\((\w+)\{provisionerId="([^"]*)", workerType="([^"]*)"\}\)$/.exec(t.metadata.query);
  assert.ok(query, t.metadata.query);
  // the gauge tgs exports, and its labels
  const gauge = registry.getSingleMetric(query[1]) as unknown as { labelNames: string[] } | undefined;
  assert.ok(gauge, `${query[1]} is a metric of src/observability/metrics.ts`);
  assert.deepEqual([...gauge.labelNames].sort(), ['provisionerId', 'workerType']);
  assert.deepEqual([query[2], query[3]], [values.shellWorker.provisionerId, values.shellWorker.workerType]);

  const [custom] = scaledObjects(render(...withPrometheus, '--set', 'shellWorker.autoscaling.prometheus.query=sum(my_demand)'));
  assert.equal((custom.spec as unknown as ScaledObjectSpec).triggers[0].metadata.query, 'sum(my_demand)');
});

test('helm lint --strict passes with autoscaling on either trigger; an unknown trigger, a target not above 0 or a Prometheus trigger without a server refuses to render', () => {
  for (const args of [autoscaled, withPrometheus, ['-f', productionValues, '--set', 'shellWorker.autoscaling.enabled=true']]) {
    const { status, output } = run(['lint', '--strict', chart, ...args]);
    assert.equal(status, 0, `helm lint ${args.join(' ')}:\n${output}`);
  }
  const unknown = run(['template', 'rel', chart, ...autoscaled, '--set', 'shellWorker.autoscaling.trigger=cpu']);
  assert.notEqual(unknown.status, 0);
  assert.match(unknown.output, /shellWorker\.autoscaling\.trigger: metrics-api or prometheus/);
  const badTarget = run(['template', 'rel', chart, ...autoscaled, '--set', 'shellWorker.autoscaling.targetTasksPerWorker=-1']);
  assert.notEqual(badTarget.status, 0, 'KEDA refuses a target of 0 or less');
  assert.match(badTarget.output, /targetTasksPerWorker: a number of tasks above 0/);
  const noServer = run(['template', 'rel', chart, ...autoscaled, '--set', 'shellWorker.autoscaling.trigger=prometheus']);
  assert.notEqual(noServer.status, 0);
  assert.match(noServer.output, /shellWorker\.autoscaling\.prometheus\.serverAddress/);
});

test('the values example of docs/deployments.md § Autoscaling shell workers renders a valid ScaledObject with what it says', () => {
  const doc = readFileSync(fileURLToPath(new URL('../../docs/deployments.md', import.meta.url)), 'utf8');
  const section = doc.slice(doc.indexOf('## Autoscaling shell workers'));
  const example = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(example, 'the section has a values example');
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-keda-'));
  try {
    writeFileSync(path.join(dir, 'values.yaml'), example);
    const manifests = render('-f', path.join(dir, 'values.yaml'));
    const [so] = scaledObjects(manifests);
    assert.ok(so, 'a ScaledObject');
    assert.deepEqual(validateScaledObject(so), []);
    const spec = so.spec as unknown as ScaledObjectSpec;
    assert.deepEqual([spec.minReplicaCount, spec.maxReplicaCount, spec.advanced?.scalingModifiers?.target], [1, 20, '8']);
    assert.ok(spec.triggers.every((t) => t.metadata.url.endsWith('/task-queues/prod%2Fshell/counts')));
    assert.equal(shellWorker(manifests).spec.replicas, undefined);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the ScaledObject check can fail: a ScaledObject without a target, with a non-string trigger value, or min above max', () => {
  const [so] = scaledObjects(render(...autoscaled));
  const spec = so.spec as unknown as ScaledObjectSpec;
  assert.notDeepEqual(validateScaledObject({ ...so, spec: { ...spec, scaleTargetRef: undefined } as unknown as Record<string, unknown> }), []);
  assert.notDeepEqual(validateScaledObject({ ...so, spec: { ...spec, triggers: [{ type: 'metrics-api', metadata: { targetValue: 4 } }] } as unknown as Record<string, unknown> }), []);
  assert.notDeepEqual(validateScaledObject({ ...so, spec: { ...spec, minReplicaCount: 5, maxReplicaCount: 2 } as unknown as Record<string, unknown> }), []);
});
