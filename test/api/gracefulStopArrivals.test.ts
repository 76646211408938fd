import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gracefulStopper, IDLE_GRACE_MS } from '../../src/api/gracefulStop.js';

// Clients that keep arriving while an API stops (each told 503 comes back 200 ms later, as a worker with one
// API does) must each get an answer: a connection accepted during the stop, whose request is still on its way
// when the idle sweep runs, is not idle and must not be closed under it (that resets the connection, and the
// client cannot tell whether its request counted).
test('graceful stop: connections arriving during the stop get an answer or a refusal, never a reset', { timeout: 60_000 }, async () => {
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"tasks":[]}'), Math.random() * 20));
  });
  const stopper = gracefulStopper(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const send = (body: string) =>
    new Promise<number>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });

  let keepComing = true;
  let stopAt = 0;
  const resets: string[] = [];
  const statuses = new Map<number, number>();
  const clients = Array.from({ length: 30 }, async (_, i) => {
    while (keepComing) {
      try {
        const status = await send(JSON.stringify({ workerId: `w${i}` }));
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status === 503) await new Promise((r) => setTimeout(r, 200 + Math.random() * 100));
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        if (e.code !== 'ECONNREFUSED') resets.push(`client ${i}: ${e.code ?? e.message} at +${Date.now() - stopAt} ms`);
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  stopAt = Date.now();
  const stopped = stopper.stop();
  // arrivals go on well past the idle grace, then stop so the listener can close
  await new Promise((r) => setTimeout(r, IDLE_GRACE_MS * 2.5));
  keepComing = false;
  await stopped;
  await Promise.all(clients);
  agent.destroy();

  assert.deepEqual(resets, [], `connections reset during the stop:\n${resets.slice(0, 10).join('\n')}`);
  assert.ok((statuses.get(503) ?? 0) > 30, `clients kept arriving during the stop and were refused: ${JSON.stringify([...statuses])}`);
  assert.ok((statuses.get(200) ?? 0) > 30, `requests answered before the stop: ${JSON.stringify([...statuses])}`);
});
