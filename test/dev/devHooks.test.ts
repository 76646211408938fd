import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import slugid from 'slugid';
import { ApiClient } from '../../src/client/http.js';
import { eventually } from '../../support/stack.js';
import { devPorts, embeddedEnv, startDevProcess, type DevProcess } from '../helpers/devProcess.js';

// Hooks' bindings in embedded `tgs dev` (PGlite, the in-process bus): the listener runs beside the in-process bridge,
// so a hook bound to task-graph-finished fires when a graph finishes, and its task runs on the dev workers.

const work = mkdtempSync(path.join(tmpdir(), 'tgs-dev-hooks-'));
let dev: DevProcess | undefined;
after(async () => {
  await dev?.interrupt();
  rmSync(work, { recursive: true, force: true });
});

const shellTask = (name: string) => {
  const now = Date.now();
  return {
    provisionerId: 'tgs-dev',
    workerType: 'shell',
    created: new Date(now).toISOString(),
    deadline: new Date(now + 3600_000).toISOString(),
    payload: { command: ['true'], maxRunTime: 60 },
    metadata: { name, description: `tgs dev hooks test ${name}`, owner: 'tests@example.com', source: 'https://example.com/tgs' },
  };
};

test('embedded tgs dev fires a hook bound to task-graph-finished when a graph finishes', async () => {
  dev = await startDevProcess(['--data-dir', path.join(work, 'data'), '--workers', '1', '--isolation', 'none', ...(await devPorts())], embeddedEnv());
  assert.match(dev.output(), /hook listener: consuming tgs\/hook-listener\//);
  const client = new ApiClient(dev.rootUrl, { clientId: dev.clientId, accessToken: dev.accessToken });
  await client.request('auth', 'PUT', `/roles/${encodeURIComponent('hook-id:dev/after-graph')}`, {
    description: 'the dev hook test',
    scopes: ['queue:create-task:lowest:tgs-dev/shell', 'queue:scheduler-id:-'],
  });
  await client.request('hooks', 'PUT', '/hooks/dev/after-graph', {
    metadata: { name: 'after a graph', description: 'fired by task-graph-finished', owner: 'tests@example.com' },
    triggerSchema: { type: 'object' },
    // a graph route: granted by `queue:route:devhooks`, so only graphs whose submitter holds it fire the hook
    bindings: [{ exchange: 'scheduler/v1/task-graph-finished', routingKeyPattern: 'route.devhooks' }],
    task: { ...shellTask('after the graph'), created: '${now}', deadline: { $fromNow: '1 hour' }, payload: { command: ['true'], maxRunTime: 60, env: { GRAPH: '${payload.status.taskGraphId}' } } },
  });
  // bound within a moment of the write (the listener is notified on commit)
  await eventually(async () => /hook listener: bound .*task-graph-finished/.test(dev?.output() ?? ''), 'the listener bound the hook', 30_000);

  const taskGraphId = slugid.nice();
  await client.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, { routing: 'devhooks', routes: ['devhooks'], tasks: { only: { task: shellTask('only') } } });
  const fires = await eventually(async () => {
    const res = await client.request<{ lastFires: { taskId: string; firedBy: string; result: string; taskState: string }[] }>('hooks', 'GET', '/hooks/dev/after-graph/last-fires').catch(() => undefined);
    return res && res.lastFires.length > 0 && res.lastFires;
  }, 'the hook fired', 90_000);
  assert.equal(fires.length, 1);
  assert.equal(fires[0].firedBy, 'pulseMessage');
  assert.equal(fires[0].result, 'success');
  const task = await client.request<{ payload: { env: Record<string, string> } }>('queue', 'GET', `/task/${fires[0].taskId}`);
  assert.equal(task.payload.env.GRAPH, taskGraphId);
  await eventually(async () => (await client.request<{ status: { state: string } }>('queue', 'GET', `/task/${fires[0].taskId}/status`)).status.state === 'completed', 'the hook\'s task ran on the dev worker', 60_000);
});
