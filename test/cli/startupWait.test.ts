import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { freePort } from '../../src/temporal/devServer.js';
import { createTestDatabase, defaultPostgresUrl, type TestDatabase } from '../../support/db.js';

// A process started before Postgres or Temporal is up (compose, a reboot, a restart during an outage) must
// wait for them. Postgres is "down" behind a port nobody listens on, then "up" once that port forwards to
// the machine's Postgres; Temporal stays down (a port nobody listens on).
let db: TestDatabase | undefined;
after(async () => db?.drop());

function forwardTo(port: number, target: URL): net.Server {
  return net
    .createServer((inbound) => {
      const outbound = net.connect(Number(target.port || 5432), target.hostname);
      inbound.pipe(outbound).pipe(inbound);
      inbound.on('error', () => outbound.destroy());
      outbound.on('error', () => inbound.destroy());
    })
    .listen(port, '127.0.0.1');
}

async function until(what: string, ok: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const count = (text: string, re: RegExp) => text.split('\n').filter((l) => re.test(l)).length;

test('tgs scheduler-worker waits for Postgres, says once that it waits and once that it connected, then waits for Temporal', { timeout: 180_000 }, async () => {
  db = await createTestDatabase({ migrate: false });
  const pgPort = await freePort();
  const temporalPort = await freePort();
  const url = new URL(db.url);
  url.host = `127.0.0.1:${pgPort}`;
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'scheduler-worker'], {
    env: { ...process.env, DATABASE_URL: url.toString(), TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let gate: net.Server | undefined;
  try {
    await until('the Postgres waiting line', () => /Postgres unavailable/.test(out) || child.exitCode !== null, 60_000);
    // several attempts fail meanwhile (250 ms, 500 ms, 1 s, 2 s apart): still one line, still running
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(child.exitCode, null, out);
    assert.equal(count(out, /Postgres unavailable/), 1, out);

    gate = forwardTo(pgPort, new URL(defaultPostgresUrl()));
    await until('the Postgres connected line', () => /Postgres back after .*connected/.test(out) || child.exitCode !== null, 60_000);
    const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'tasks'`);
    assert.equal(rows[0].n, 1, 'it migrated once Postgres was reachable');

    await until('the Temporal waiting line', () => /Temporal at .* unavailable/.test(out) || child.exitCode !== null, 60_000);
    await new Promise((r) => setTimeout(r, 3000));
    assert.equal(child.exitCode, null, out);
    assert.equal(count(out, /Temporal at .* unavailable/), 1, out);
    assert.equal(count(out, /Postgres unavailable/), 1, out);

    // an operator can still stop it while it waits
    const signalled = Date.now();
    child.kill('SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 15_000))]);
    assert.ok(child.exitCode !== null || child.signalCode !== null, `still running 15 s after SIGTERM:\n${out}`);
    assert.ok(Date.now() - signalled < 15_000);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
    gate?.close();
  }
});
