import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort, listensOn } from '../../src/temporal/devServer.js';

const listen = (port: number) =>
  new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
const close = (server: ReturnType<typeof createServer>) => new Promise((r) => server.close(r));

/** Connections in TIME_WAIT (state 06) whose local port is `port`. */
const timeWaitOn = (port: number) =>
  readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f.length > 3 && f[3] === '06' && parseInt(f[1].split(':')[1], 16) === port).length;

test('freePort leaves its port in TIME_WAIT, so listen(0) elsewhere does not hand it out, and the port can still be bound', async () => {
  const port = await freePort();
  assert.ok(timeWaitOn(port) >= 1, `a TIME_WAIT connection on ${port}`);
  const server = await listen(port);
  await close(server);
});

test('freePort gives the preferred port when it is free, another one when it is taken', async () => {
  const taken = await listen(0);
  const takenPort = (taken.address() as { port: number }).port;
  const other = await freePort(takenPort);
  assert.notEqual(other, takenPort);
  await close(taken);
  const preferred = await freePort();
  assert.equal(await freePort(preferred), preferred);
});

test('listensOn tells the process that holds a listening port from one that does not', async () => {
  const server = await listen(0);
  const port = (server.address() as { port: number }).port;
  assert.equal(listensOn(process.pid, port), true);
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)'], { stdio: 'ignore' });
  try {
    assert.equal(listensOn(child.pid as number, port), false);
  } finally {
    child.kill();
  }
  await close(server);
  assert.equal(listensOn(process.pid, port), false);
});
