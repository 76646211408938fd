import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, hawkHeader, type TestApi } from '../../support/api.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { MAX_ECHOED_PAYLOAD_CHARS } from '../../src/api/errorReply.js';
import { streamRequest } from './helpers.js';

const KB = 1024;
const MB = 1024 * KB;
let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

/** The bench's scale graph: 100 layers of 1,000 tasks, each requiring 4 tasks of the layer before. */
function benchGraph() {
  const layers = 100;
  const width = 1000;
  const nodes: Record<string, { requires?: string[] }> = {};
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const requires = l === 0 ? [] : Array.from({ length: 4 }, (_, k) => `l${l - 1}-${(w + k * 7) % width}`);
      nodes[`l${l}-${w}`] = { requires: [...new Set(requires)] };
    }
  }
  return graphOf(nodes, 'scale');
}

test('createTaskGraph takes the 100,000-task graph of the bench, and refuses a body over TGS_MAX_GRAPH_BYTES unread', async () => {
  const graph = benchGraph();
  // Invalid only in its routing, so the API reads, parses and validates the whole body, then refuses it
  // without creating 100,000 tasks.
  const body = JSON.stringify({ ...graph, routing: 'not valid!' });
  assert.ok(body.length > 30 * MB && body.length < t.config.maxGraphBytes, `${body.length} bytes`);
  const url = `${t.rootUrl}/api/scheduler/v1/task-graph/${slugid.nice()}`;
  const res = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: hawkHeader(url, 'PUT', t.root) }, body });
  const reply = (await res.json()) as { code: string; requestInfo: { payload: unknown } };
  assert.equal(res.status, 400, JSON.stringify(reply).slice(0, 500));
  assert.match(reply.code, /^Input/);
  const over = await streamRequest(url, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: hawkHeader(url, 'PUT', t.root) },
    totalBytes: t.config.maxGraphBytes + 1,
  });
  assert.equal(over.status, 413);
  assert.equal(over.body.code, 'InputTooLarge');
  assert.ok(over.sentWhenAnswered < t.config.maxGraphBytes / 2, `answered after ${over.sentWhenAnswered / MB} MB`);
});

test('other endpoints take the few KB they need', async () => {
  const taskId = slugid.nice();
  // createTask: 1 MiB (a payload of 600 KB is fine, 2 MiB is not)
  const big = await t.request('PUT', `/api/queue/v1/task/${taskId}`, fastTask('big', ['completed'], { blob: 'x'.repeat(600 * KB) }));
  assert.equal(big.status, 200, JSON.stringify(big.body).slice(0, 300));
  const tooBig = await t.request('PUT', `/api/queue/v1/task/${slugid.nice()}`, fastTask('big', ['completed'], { blob: 'x'.repeat(2 * MB) }));
  assert.equal(tooBig.status, 413);
  assert.equal(tooBig.body.code, 'InputTooLarge');
  // claimWork: 64 KiB
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/none', { workerGroup: 'g', workerId: 'w', tasks: 1, pad: 'x'.repeat(100 * KB) });
  assert.equal(claim.status, 413);
  // an endpoint without input: 1 KiB
  const cancel = await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`, { pad: 'x'.repeat(2 * KB) });
  assert.equal(cancel.status, 413);
});

test('error replies echo at most a few KB of the request body', async () => {
  const tail = 'THE-END-OF-THE-BODY';
  const res = await t.request('PUT', `/api/queue/v1/task/${slugid.nice()}`, { ...fastTask('x'), provisionerId: 'no good!', payload: { blob: `${'y'.repeat(200 * KB)}${tail}` } });
  assert.equal(res.status, 400);
  const payload = res.body.requestInfo.payload as string;
  assert.equal(typeof payload, 'string');
  assert.ok(payload.length < MAX_ECHOED_PAYLOAD_CHARS + 100, `${payload.length} characters`);
  assert.match(payload, /truncated/);
  assert.ok(!JSON.stringify(res.body).includes(tail));
  assert.ok(JSON.stringify(res.body).length < 8 * KB);
  // A small body is echoed as it was (Taskcluster's requestInfo.payload).
  const small = await t.request('PUT', `/api/queue/v1/task/${slugid.nice()}`, { ...fastTask('x'), provisionerId: 'no good!' });
  assert.equal(small.status, 400);
  assert.equal(small.body.requestInfo.payload.provisionerId, 'no good!');
});
