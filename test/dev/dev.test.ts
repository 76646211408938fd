import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import slugid from 'slugid';
import { Client, Connection } from '@temporalio/client';
import { ApiClient } from '../../src/client/http.js';
import { startTaskGraph } from '../../src/temporal/startTaskGraph.js';
import { TgsClient } from '../../src/client/tgsClient.js';
import { startTestTemporal } from '../../support/temporal.js';
import { eventually } from '../../support/stack.js';
import { freePort } from '../../src/temporal/devServer.js';
import { childrenOf, devPorts, embeddedEnv, isRunning, processesMentioning, runDevToEnd, startDevProcess, type DevProcess } from '../helpers/devProcess.js';

const work = mkdtempSync(path.join(tmpdir(), 'tgs-dev-test-'));
const running: DevProcess[] = [];
after(async () => {
  for (const p of running) await p.interrupt();
  rmSync(work, { recursive: true, force: true });
});

/**
 * A two-task graph for `tgs dev --workers`: b runs after a and checks what a wrote into the test's directory. Only
 * unsandboxed runs share a filesystem, so the tgs dev instances that run it get `--isolation none` (UNSANDBOXED); the
 * README's main job below runs in the default sandbox.
 */
function smallGraph(marker: string) {
  const now = Date.now();
  const task = (name: string, command: string) => ({
    provisionerId: 'tgs-dev',
    workerType: 'shell',
    created: new Date(now).toISOString(),
    deadline: new Date(now + 3600_000).toISOString(),
    payload: { command: ['sh', '-c', command], maxRunTime: 60 },
    metadata: { name, description: `tgs dev test ${name}`, owner: 'tests@example.com', source: 'https://example.com/tgs' },
  });
  return {
    routing: 'dev-test',
    tasks: {
      a: { task: task('a', `echo ${marker} > ${path.join(work, `${marker}.txt`)}`) },
      b: { requires: ['a'], task: task('b', `grep -q ${marker} ${path.join(work, `${marker}.txt`)}`) },
    },
  };
}

const UNSANDBOXED = ['--isolation', 'none'];

async function graphState(client: ApiClient, taskGraphId: string): Promise<string> {
  const { status } = await client.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${taskGraphId}/status`);
  return status.state;
}

async function start(args: string[], env = embeddedEnv()): Promise<DevProcess> {
  const p = await startDevProcess(args, env);
  running.push(p);
  return p;
}

test('embedded tgs dev: a graph runs to finished with --workers 1; Ctrl-C stops everything; a restart still knows the graph; one data dir, one tgs dev; a second instance takes other ports', async () => {
  const dataDir = path.join(work, 'instance-1');
  // The ports are free when picked, not always when tgs dev binds them: another process may take one meanwhile
  // (seen: the metrics port, which tgs dev must not move since it was asked for). Such a start is tried again.
  let ports: string[] = [];
  let metricsPort = 0;
  let dev: DevProcess | undefined;
  for (let attempt = 1; !dev; attempt++) {
    ports = await devPorts();
    metricsPort = await freePort();
    try {
      dev = await start(['--data-dir', dataDir, '--workers', '1', ...UNSANDBOXED, ...ports], embeddedEnv({ TGS_METRICS_PORT: String(metricsPort) }));
    } catch (err) {
      if (attempt >= 3 || !/EADDRINUSE/.test((err as Error).message)) throw err;
    }
  }
  const out = dev.output();
  assert.match(out, /unsafe: tasks share the worker's identity and can read its credentials \(--isolation none\)/, '--isolation reaches the workers');
  assert.match(out, /embedded PGlite in .*instance-1\/pglite/);
  assert.match(out, /in-process message bus/);
  assert.match(out, /starting a Temporal dev server/);
  assert.match(out, new RegExp(`UI +${dev.rootUrl.replace(/[.]/g, '\\.')}/ui/`));
  assert.match(out, /Temporal UI +http:\/\/127\.0\.0\.1:\d+/);
  assert.match(out, new RegExp(`Temporal CLI +/\\S+/temporal workflow list --address 127\\.0\\.0\\.1:${ports[3]}`));
  // a quiet console: no fastify deprecation, one line for the first start's migrations
  assert.doesNotMatch(out, /FastifyDeprecation|FSTDEP/);
  assert.equal(out.match(/applied \d+ migration\(s\)/g)?.length, 1, out);
  assert.equal(dev.rootUrl, `http://127.0.0.1:${ports[1]}`, 'the API on the port asked for');
  assert.equal(dev.temporalAddress, `127.0.0.1:${ports[3]}`);
  assert.equal(dev.clientId, 'static/tgs/root');
  const temporalChildren = childrenOf(dev.child.pid as number).filter((c) => c.command.startsWith('temporal'));
  assert.equal(temporalChildren.length, 1, `one Temporal dev server child: ${JSON.stringify(childrenOf(dev.child.pid as number))}`);

  const client = new ApiClient(dev.rootUrl, { clientId: dev.clientId, accessToken: dev.accessToken });
  const taskGraphId = slugid.nice();
  await client.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, smallGraph('first'));
  await eventually(async () => (await graphState(client, taskGraphId)) === 'finished', 'the graph to finish', 90_000);
  const info = await client.request<{ counts: Record<string, number> }>('scheduler', 'GET', `/task-graph/${taskGraphId}/info`);
  assert.deepEqual(info.counts, { completed: 2 });
  // The workers ran it with a client of worker scopes only, never root (a task that took its worker's credentials
  // would hold just these); per-task actions use the credentials claimWork hands out.
  assert.match(out, /1 shell worker\(s\) for tgs-dev\/shell as client static\/tgs\/dev-workers \(queue:claim-work:tgs-dev\/shell, queue:worker-id:tgs-dev\/\*\)/);
  const workerClient = await client.request<{ scopes: string[]; expandedScopes: string[] }>('auth', 'GET', `/clients/${encodeURIComponent('static/tgs/dev-workers')}`);
  assert.deepEqual(workerClient.scopes, ['queue:claim-work:tgs-dev/shell', 'queue:worker-id:tgs-dev/*']);
  assert.ok(!workerClient.expandedScopes.some((s) => s === '*' || s.endsWith(':*') || !s.startsWith('queue:')), `worker scopes only: ${workerClient.expandedScopes}`);
  assert.equal(statSync(dataDir).mode & 0o777, 0o700, 'the data directory is owner-only');

  // Every part's metrics on one port (one registry in the process), the Temporal SDK's included.
  assert.match(out, new RegExp(`metrics +http://127\\.0\\.0\\.1:${metricsPort}/metrics`));
  const scrape = await eventually(async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    return /^tgs_graph_hop_seconds_count [1-9]/m.test(text) ? text : undefined;
  }, 'the hop of b in the metrics');
  // the dev's shell worker holds a worker stream (it claims over no claimWork request)
  for (const metric of [/^tgs_worker_streams 1$/m, /^tgs_http_request_duration_seconds_count\{service="scheduler",method="createTaskGraph",status="200"\} [1-9]/m, /^tgs_graph_signal_lag_seconds_count [1-9]/m, /^tgs_relay_published_messages_total [1-9]/m, /^tgs_task_graphs\{state="finished"\} 1$/m, /^temporal_workflow_task_execution_latency_bucket/m]) {
    assert.match(scrape, metric);
  }
  // Its stdout is no terminal here: the parts log JSON lines, each with its role; the banner stays plain text.
  const roles = new Set(dev.output().split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { role?: string }).role));
  for (const role of ['api', 'relay', 'bridge', 'shell-worker', 'scheduler-worker']) assert.ok(roles.has(role), `a ${role} line in:\n${dev.output()}`);

  // The same data directory while it runs: refused at once, saying who holds it.
  const second = await runDevToEnd(['--data-dir', dataDir, ...(await devPorts())], embeddedEnv());
  assert.equal(second.code, 1, second.output);
  assert.match(second.output, new RegExp(`in use by process ${dev.child.pid}.*--data-dir`));

  // Another data directory with the same (now taken) API port given with --port: an error naming the port and who
  // holds it, since a moved API would leave another shell's exported TGS_ROOT_URL on this instance.
  const taken = await runDevToEnd(['--data-dir', path.join(work, 'instance-2'), ...ports], embeddedEnv());
  assert.equal(taken.code, 1, taken.output);
  assert.match(taken.output, new RegExp(`port ${ports[1]} is taken \\(pid ${dev.child.pid}: [^)]*\\): stop that, or give another --port`));
  // Without --port, a data directory that used that port last tries the next ports in order, saying so; the
  // Temporal ports (taken too) fall back to free ones.
  writeFileSync(path.join(work, 'instance-2', 'api-port'), `${ports[1]}\n`);
  const other = await start(['--data-dir', path.join(work, 'instance-2'), ...ports.slice(2)]);
  assert.match(other.output(), new RegExp(`port ${ports[1]} is taken \\(pid ${dev.child.pid}: [^)]*\\); trying ${Number(ports[1]) + 1}`));
  assert.ok(Number(new URL(other.rootUrl).port) > Number(ports[1]), other.rootUrl);
  assert.notEqual(other.rootUrl, dev.rootUrl);
  assert.notEqual(other.temporalAddress, dev.temporalAddress);
  const otherClient = new ApiClient(other.rootUrl, { clientId: other.clientId, accessToken: other.accessToken });
  await assert.rejects(otherClient.request('scheduler', 'GET', `/task-graph/${taskGraphId}/status`), /not found/i, 'its own database');
  const otherTemporal = childrenOf(other.child.pid as number).filter((c) => c.command.startsWith('temporal'));
  assert.equal(await other.interrupt(), 0, other.output());
  for (const c of otherTemporal) assert.equal(isRunning(c.pid), false, 'its Temporal dev server is gone');

  assert.equal(await dev.interrupt(), 0, dev.output());
  for (const c of temporalChildren) assert.equal(isRunning(c.pid), false, 'the Temporal dev server is gone after Ctrl-C');
  assert.match(dev.output(), /SIGINT, shutting down/);
  // a stop reads as one: no error-like lines from parts that stopped as asked, and no RabbitMQ where there is none
  assert.doesNotMatch(dev.output(), /Not running\. Current state|stopping the scheduler worker:|RabbitMQ/);
  assert.deepEqual(processesMentioning(dataDir), [], 'no process of this instance is left');

  // Restart on the same data directory without --port: same API port and credentials, so exported ones still work;
  // the graph and its tasks are still there.
  const again = await start(['--data-dir', dataDir, '--workers', '1', ...UNSANDBOXED, ...(await devPorts()).slice(2)]);
  assert.equal(again.rootUrl, dev.rootUrl, 'the API port is kept in the data directory');
  assert.equal(again.accessToken, dev.accessToken, 'the root token is kept in the data directory');
  const againClient = new ApiClient(again.rootUrl, { clientId: again.clientId, accessToken: again.accessToken });
  assert.equal(await graphState(againClient, taskGraphId), 'finished');
  // ...and it still runs new graphs (the Temporal history in the same directory included).
  const next = slugid.nice();
  await againClient.request('scheduler', 'PUT', `/task-graph/${next}`, smallGraph('second'));
  await eventually(async () => (await graphState(againClient, next)) === 'finished', 'the second graph to finish', 90_000);
  assert.equal(await again.interrupt(), 0, again.output());
});

test('tgs dev with TEMPORAL_ADDRESS: starts no Temporal dev server, says which server it uses, and graphs run there', async () => {
  const server = await startTestTemporal();
  const connection = await Connection.connect({ address: server.address });
  try {
    const dev = await start(['--data-dir', path.join(work, 'external-temporal'), '--workers', '1', ...UNSANDBOXED, ...(await devPorts())], embeddedEnv({ TEMPORAL_ADDRESS: server.address }));
    assert.doesNotMatch(dev.output(), /starting a Temporal dev server/);
    assert.match(dev.output(), new RegExp(`Temporal +${server.address.replace(/[.]/g, '\\.')} \\(TEMPORAL_ADDRESS`));
    assert.equal(dev.temporalAddress, server.address);
    assert.deepEqual(childrenOf(dev.child.pid as number).filter((c) => c.command.startsWith('temporal')), [], 'no temporal child process');

    const client = new ApiClient(dev.rootUrl, { clientId: dev.clientId, accessToken: dev.accessToken });
    const taskGraphId = slugid.nice();
    await client.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, smallGraph('external'));
    await eventually(async () => (await graphState(client, taskGraphId)) === 'finished', 'the graph to finish', 90_000);
    // The workflow lives on the server of TEMPORAL_ADDRESS.
    const description = await new Client({ connection }).workflow.getHandle(`task-graph/${taskGraphId}`).describe();
    assert.equal(description.type, 'taskGraph');
    // Temporal-native starts work out of the box, as a dev client limited to the dev workers' provisioner.
    assert.match(dev.output(), /Temporal graphs act as client static\/tgs\/dev-temporal \(scopes scheduler:create-task-graph scheduler:amend-task-graph:\* queue:scheduler-id:\S+ queue:create-task:highest:tgs-dev\/\*\)/);
    const temporalClient = new Client({ connection });
    const native = await startTaskGraph(temporalClient, smallGraph('native'));
    assert.deepEqual(await native.handle.result(), { taskGraphId: native.taskGraphId, state: 'finished' });
    const elsewhere = smallGraph('elsewhere');
    elsewhere.tasks.a.task.provisionerId = 'someone-else';
    const refused = await startTaskGraph(temporalClient, elsewhere);
    await assert.rejects(refused.handle.result(), (err: Error) => {
      assert.match(String((err as { cause?: Error }).cause?.message), /lacks scopes: .*queue:create-task:[a-z-]+:someone-else\/shell/);
      return true;
    });
    assert.equal(await dev.interrupt(), 0, dev.output());
    assert.ok(isRunning(server.process.pid as number), 'the external Temporal server is left alone');
  } finally {
    await connection.close();
    await server.stop();
  }
});

test('tgs dev --submit FILE --exit: exits 0 when the graph finished, 1 when it blocked, and leaves nothing running', async () => {
  const ok = path.join(work, 'ok.json');
  writeFileSync(ok, JSON.stringify(smallGraph('submitted')));
  const failing = smallGraph('blocked');
  failing.tasks.b.task.payload.command = ['sh', '-c', 'echo about to fail; exit 3'];
  const bad = path.join(work, 'bad.yml');
  writeFileSync(bad, JSON.stringify(failing)); // YAML is a superset of JSON: the .yml path goes through the YAML reader
  const dataDir = path.join(work, 'submit');
  const good = await runDevToEnd(['--data-dir', dataDir, '--workers', '1', ...UNSANDBOXED, '--submit', ok, '--exit', ...(await devPorts())], embeddedEnv(), 180_000);
  assert.equal(good.code, 0, good.output);
  assert.match(good.output, /\[ok\.json\] submitted as task graph (\S+): http:\/\/127\.0\.0\.1:\d+\/ui\/task-graph\//);
  assert.match(good.output, /\[ok\.json\] finished in \d+ s: 2 of 2 tasks completed/);
  const blocked = await runDevToEnd(['--data-dir', dataDir, '--workers', '1', ...UNSANDBOXED, '--submit', bad, '--exit', ...(await devPorts())], embeddedEnv(), 180_000);
  assert.equal(blocked.code, 1, blocked.output);
  assert.match(blocked.output, /\[bad\.yml\] task-graph \S+ is blocked by b \(/);
  assert.match(blocked.output, /\[bad\.yml\] about to fail/, "the end of the blocking task's log");
  assert.match(blocked.output, /not every graph finished; stopping/);
  assert.deepEqual(processesMentioning(dataDir), [], 'no process of these runs is left (the Temporal dev server included)');
});

test("the README's main job in embedded mode: tgs dev --workers 2 --submit every example --exit, each to its expected end", async () => {
  const dataDir = path.join(work, 'examples');
  const examples = ['build-test-package', 'fan-out-fan-in', 'flaky-reruns'];
  const run = await runDevToEnd(
    ['--data-dir', dataDir, '--workers', '2', ...examples.flatMap((e) => ['--submit', `examples/${e}/graph.yaml`]), '--exit', ...(await devPorts())],
    embeddedEnv(),
    300_000,
  );
  assert.equal(run.code, 0, run.output);
  assert.match(run.output, /every graph finished; stopping/);
  // as root with bwrap (this machine, CI): the examples ran sandboxed
  assert.match(run.output, /isolation bwrap \(the strongest this machine gives\)/);
  const ids = Object.fromEntries(
    examples.map((e) => {
      const m = new RegExp(`\\[${e}/graph\\.yaml\\] submitted as task graph (\\S+):`).exec(run.output);
      assert.ok(m, `${e} was submitted:\n${run.output}`);
      assert.match(run.output, new RegExp(`\\[${e}/graph\\.yaml\\] finished in \\d+ s`));
      return [e, m[1]];
    }),
  );
  // The results are in the embedded database: look at them through a restarted tgs dev.
  const dev = await start(['--data-dir', dataDir, ...(await devPorts())]);
  const client = new TgsClient({ rootUrl: dev.rootUrl, credentials: { clientId: dev.clientId, accessToken: dev.accessToken } });
  const task = async (example: string, label: string) => (await client.inspect(ids[example], label)).taskId;
  const text = async (taskId: string, name: string) => (await client.artifact(taskId, name)).data.toString('utf8');
  assert.equal(await text(await task('fan-out-fan-in', 'combine'), 'public/total.txt'), '80200\n');
  assert.match(await text(await task('build-test-package', 'package'), 'public/release/SHA256SUMS'), /^[0-9a-f]{64} {2}app\.tar\.gz\n/);
  const flaky = await client.taskStatus(await task('flaky-reruns', 'flaky-test'));
  assert.deepEqual(flaky.runs.map((r) => r.state), ['failed', 'completed']);
  assert.equal(await dev.interrupt(), 0, dev.output());
});
