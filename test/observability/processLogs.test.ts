import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { ROOT_CLIENT_ID } from '../../src/config.js';
import { freePort } from '../../src/temporal/devServer.js';
import { ApiClient } from '../../src/client/http.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { eventually } from '../../support/stack.js';
import { fastTask } from '../../support/graphs.js';

// Real processes, as an operator runs them: `tgs api` and `tgs relay`, their stdout read line by line.
let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db.drop();
});

interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** every stdout line parsed as JSON (a line that is not JSON fails the test) */
  lines(): Record<string, unknown>[];
  stop(): Promise<void>;
}

function spawnTgs(command: string, env: Record<string, string>): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', command], {
    env: { ...process.env, DATABASE_URL: db.url, TGS_EXCHANGE_PREFIX: `test-${randomBytes(4).toString('hex')}/`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    lines: () =>
      out
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => {
          try {
            return JSON.parse(l) as Record<string, unknown>;
          } catch {
            throw new Error(`not a JSON line: ${l}`);
          }
        }),
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** `tgs api` on free ports with a root token; creates a task and claims it; returns the process and the taskId. */
async function apiWithClaim(logLevel: string | undefined): Promise<{ api: Proc; taskId: string; metricsPort: number }> {
  const port = await freePort();
  const metricsPort = await freePort();
  const token = randomBytes(20).toString('hex');
  const api = spawnTgs('api', {
    PORT: String(port),
    TGS_METRICS_PORT: String(metricsPort),
    TGS_ROOT_ACCESS_TOKEN: token,
    TGS_ROOT_URL: `http://127.0.0.1:${port}`,
    ...(logLevel ? { TGS_LOG_LEVEL: logLevel } : {}),
  });
  const rootUrl = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(`${rootUrl}/api/queue/v1/ping`)).ok, `tgs api up\n${api.stderr()}`, 60_000);
  const client = new ApiClient(rootUrl, { clientId: ROOT_CLIENT_ID, accessToken: token });
  const taskId = slugid.nice();
  const workerType = `logs-${randomBytes(3).toString('hex')}`;
  await client.request('queue', 'PUT', `/task/${taskId}`, { ...fastTask('logged'), workerType });
  const claimed = await client.request<{ tasks: { status: { taskId: string } }[] }>('queue', 'POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal(claimed.tasks[0]?.status.taskId, taskId);
  await client.request('queue', 'POST', `/task/${taskId}/runs/0/completed`);
  return { api, taskId, metricsPort };
}

test('tgs api logs JSON lines: level, role, request id, and the taskIds / runIds of the runs a call claimed and a statement resolved', async () => {
  const { api, taskId, metricsPort } = await apiWithClaim(undefined);
  try {
    const names = (l: Record<string, unknown>) => Array.isArray(l.taskIds) && l.taskIds.includes(taskId);
    const lines = await eventually(async () => {
      const all = api.lines();
      return all.some((l) => names(l) && l.msg === 'tasks completed') ? all : undefined;
    }, 'the completion line');
    const mine = lines.filter(names);
    const claim = mine.find((l) => l.msg === 'tasks claimed');
    assert.ok(claim, JSON.stringify(mine));
    assert.equal(claim.level, 30, 'info');
    assert.equal(claim.role, 'api');
    assert.deepEqual(claim.taskIds, [taskId]);
    assert.deepEqual(claim.runIds, [0]);
    assert.equal(claim.workerId, 'w');
    assert.match(String(claim.reqId), /^[0-9a-f-]{36}$/);
    const done = mine.find((l) => l.msg === 'tasks completed');
    assert.ok(done);
    assert.deepEqual(done.runIds, [0]);
    assert.equal(done.state, 'completed');
    // the report statement's line names the requests whose reports it wrote
    assert.ok(Array.isArray(done.reqIds) && done.reqIds.length === 1, JSON.stringify(done));
    assert.match(String(done.reqIds[0]), /^[0-9a-f-]{36}$/);
    assert.notEqual(done.reqIds[0], claim.reqId, 'one id per request');
    assert.equal(mine.filter((l) => l.msg === 'tasks claimed' || l.msg === 'tasks completed').length, 2, 'one line a call, one a statement');
    // every line: a level, a role, a time
    for (const l of lines) {
      assert.equal(typeof l.level, 'number', JSON.stringify(l));
      assert.equal(typeof l.role, 'string', JSON.stringify(l));
      assert.match(String(l.time), /^\d{4}-\d\d-\d\dT/);
    }
    assert.ok(lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('tgs api listening on')));
    // the same process serves its metrics on its metrics port
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(text, /tgs_http_request_duration_seconds_count\{service="queue",method="claimWork",status="200"\} 1/);
    assert.match(text, /tgs_task_pending_seconds_count 1/);
  } finally {
    await api.stop();
  }
  assert.ok(api.lines().some((l) => l.msg === 'tgs: SIGTERM, shutting down' && l.role === 'process'));
});

test('TGS_LOG_LEVEL=warn silences info lines', async () => {
  const { api, taskId } = await apiWithClaim('warn');
  try {
    // The completion was answered; give the process a moment to write anything it was going to.
    await new Promise((r) => setTimeout(r, 300));
    const lines = api.lines();
    assert.ok(!lines.some((l) => l.taskId === taskId), api.stdout());
    assert.ok(lines.every((l) => (l.level as number) >= 40), api.stdout());
  } finally {
    await api.stop();
  }
});

test('a TGS_LOG_LEVEL that is no level stops the process with a message naming the levels', async () => {
  const api = spawnTgs('api', { TGS_LOG_LEVEL: 'loud', PORT: String(await freePort()) });
  const code = await new Promise((r) => api.child.once('exit', r));
  assert.equal(code, 1);
  assert.match(api.stderr(), /TGS_LOG_LEVEL must be one of fatal, error, warn, info, debug, trace, silent, got "loud"/);
});

test('tgs relay logs JSON lines with its role and serves /health and its outbox gauges on TGS_METRICS_PORT', async () => {
  const metricsPort = await freePort();
  const relay = spawnTgs('relay', { TGS_METRICS_PORT: String(metricsPort) });
  try {
    await eventually(async () => relay.lines().some((l) => l.role === 'relay' && l.msg === 'active (holds the relay lock)'), `the relay active\n${relay.stdout()}${relay.stderr()}`, 60_000);
    assert.equal((await fetch(`http://127.0.0.1:${metricsPort}/health`)).status, 200);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(text, /^tgs_outbox_messages \d+$/m);
    assert.match(text, /^tgs_outbox_oldest_age_seconds [\d.e-]+$/m);
    assert.match(text, /^tgs_relay_active 1$/m);
  } finally {
    await relay.stop();
  }
});
