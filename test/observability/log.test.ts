import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { spawnSync } from 'node:child_process';
import { configureLogging, lineLogger, logger } from '../../src/log.js';
import { TurnBufferedDestination } from '../../src/logDestination.js';
import { temporalLogFunction } from '../../src/temporal/runtime.js';
import { loadConfig, logLevelFromEnv, logFormatFromEnv } from '../../src/config.js';

after(() => {
  configureLogging({ level: 'silent' });
});

function capture(options: { level?: string; format?: 'json' | 'pretty' } = {}) {
  const stream = new PassThrough();
  let text = '';
  stream.on('data', (d: Buffer) => (text += d.toString()));
  configureLogging({ level: options.level ?? 'info', format: options.format ?? 'json', destination: stream });
  return { text: () => text, json: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}

test('logger(role) lines are JSON with level, ISO time, role and the fields given', () => {
  const out = capture();
  logger('api').info({ taskIds: ['fN1LmdbaSQGuKMzmvRJqcA'], runIds: [0] }, 'tasks claimed');
  const [line] = out.json();
  assert.equal(line.level, 30);
  assert.equal(line.role, 'api');
  assert.deepEqual(line.taskIds, ['fN1LmdbaSQGuKMzmvRJqcA']);
  assert.equal(line.msg, 'tasks claimed');
  assert.match(String(line.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test('the level drops lines below it', () => {
  const out = capture({ level: 'warn' });
  const log = logger('relay');
  log.info('not shown');
  log.warn('shown');
  assert.deepEqual(out.json().map((l) => l.msg), ['shown']);
});

test('pretty format: one readable line an event, the part first and the fields after the message', () => {
  const out = capture({ format: 'pretty' });
  logger('bridge').info({ taskGraphId: 'g', runId: 2 }, 'consuming');
  logger('api').warn('no fields');
  const lines = out.text().split('\n').filter(Boolean);
  assert.equal(lines.length, 2, out.text());
  assert.match(lines[0], /INFO: bridge: consuming \{"taskGraphId":"g","runId":2\}$/);
  assert.match(lines[1], /WARN: api: no fields$/);
  assert.throws(() => JSON.parse(lines[0]));
});

test('lineLogger: a shell worker line about one run carries its taskId and runId', () => {
  const out = capture();
  const log = lineLogger(logger('shell-worker'));
  log('fN1LmdbaSQGuKMzmvRJqcA/2: completed (exit code 0)');
  log('claiming tasks of a/b as g/w, capacity 1');
  const [run, other] = out.json();
  assert.equal(run.taskId, 'fN1LmdbaSQGuKMzmvRJqcA');
  assert.equal(run.runId, 2);
  assert.equal(run.msg, 'fN1LmdbaSQGuKMzmvRJqcA/2: completed (exit code 0)');
  assert.equal(other.taskId, undefined);
});

test("Temporal SDK entries: the workflow's runId becomes workflowRunId, a graph workflow's id gives taskGraphId", () => {
  const out = capture();
  temporalLogFunction(logger('scheduler-worker'))({
    level: 'WARN',
    message: 'Workflow task failed',
    timestampNanos: 0n,
    meta: { workflowId: 'task-graph/abc', runId: 'r-1', namespace: 'default' },
  });
  const [line] = out.json();
  assert.equal(line.level, 40);
  assert.equal(line.taskGraphId, 'abc');
  assert.equal(line.workflowRunId, 'r-1');
  assert.equal(line.runId, undefined);
  assert.equal(line.namespace, 'default');
});

test('TGS_LOG_LEVEL, TGS_LOG_FORMAT and TGS_METRICS_PORT are read and checked', () => {
  assert.equal(logLevelFromEnv({}), 'info');
  assert.equal(logLevelFromEnv({ TGS_LOG_LEVEL: ' WARN ' }), 'warn');
  assert.throws(() => logLevelFromEnv({ TGS_LOG_LEVEL: 'verbose' }), /TGS_LOG_LEVEL must be one of/);
  assert.equal(logFormatFromEnv({}), undefined);
  assert.equal(logFormatFromEnv({ TGS_LOG_FORMAT: 'pretty' }), 'pretty');
  assert.throws(() => logFormatFromEnv({ TGS_LOG_FORMAT: 'xml' }), /TGS_LOG_FORMAT must be json or pretty/);
  assert.equal(loadConfig({}).metricsPort, 0);
  assert.equal(loadConfig({ TGS_METRICS_PORT: '9464' }).metricsPort, 9464);
  assert.throws(() => loadConfig({ TGS_METRICS_PORT: 'x' }), /TGS_METRICS_PORT/);
});

test('lineLogger: fields a line names (the bridge names the graph) become JSON fields', () => {
  const out = capture();
  const log = lineLogger(logger('bridge'), 'warn');
  log('bridge: signal to task-graph/d_598_aOSZutAokpkwWp-g failed (gone); retried with backoff', { taskGraphId: 'd_598_aOSZutAokpkwWp-g' });
  const [line] = out.json();
  assert.equal(line.taskGraphId, 'd_598_aOSZutAokpkwWp-g');
  assert.equal(line.role, 'bridge');
  assert.equal(line.level, 40);
});

test('stdout gets the lines of one turn in one write, in order, and the next turn its own', async () => {
  const writes: string[] = [];
  const dest = new TurnBufferedDestination({ write: (text: string) => writes.push(text) });
  dest.write('{"msg":"claimed 1"}\n');
  dest.write('{"msg":"claimed 2"}\n');
  assert.deepEqual(writes, [], 'nothing before the turn ends');
  await new Promise((r) => setImmediate(r));
  dest.write('{"msg":"completed 1"}\n');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(writes, ['{"msg":"claimed 1"}\n{"msg":"claimed 2"}\n', '{"msg":"completed 1"}\n']);
  // pino's logger.flush(cb): what waits is written, then the callback
  dest.write('{"msg":"last"}\n');
  let called = false;
  dest.flush(() => (called = true));
  assert.ok(called);
  assert.equal(writes.at(-1), '{"msg":"last"}\n');
});

test("a process's last lines are written when it exits in the turn that logged them (a fatal line, then process.exit)", () => {
  const script = "import { logger } from './src/log.ts'; const log = logger('api'); log.info('tasks claimed'); log.fatal('uncaught exception'); process.exit(3);";
  const child = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
    encoding: 'utf8',
    env: { ...process.env, TGS_LOG_LEVEL: 'info', TGS_LOG_FORMAT: 'json' },
  });
  assert.equal(child.status, 3, child.stderr);
  const lines = child.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string; level: number });
  assert.deepEqual(lines.map((l) => [l.level, l.msg]), [[30, 'tasks claimed'], [60, 'uncaught exception']]);
});
