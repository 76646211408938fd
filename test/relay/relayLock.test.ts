import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import type { DbSession } from '../../src/db/pool.js';
import { RELAY_LOCK, RelayLock, STANDBY_RETRY_MS, STEP_DOWN_MS } from '../../src/relay/relayLock.js';

// The lock's own logic, on a scripted session: when it counts as held, that a failure is reported once however many
// ways it arrives, what a standby and a stopped relay do. On real Postgres, test/relay/relay.test.ts kills the
// lock session of a running relay and checks the standby takes over.

/** A session that answers the lock query from `grants` (one answer a try) and fails queries once `broken`. */
class ScriptedSession extends EventEmitter {
  readonly queries: string[] = [];
  broken: Error | undefined;
  ended = false;
  constructor(private readonly grants: boolean[]) {
    super();
  }
  async query(text: string, values?: unknown[]) {
    if (this.broken) throw this.broken;
    this.queries.push(text);
    if (text.includes('pg_try_advisory_lock')) {
      assert.deepEqual(values, [RELAY_LOCK]);
      return { rows: [{ ok: this.grants.shift() ?? true }] };
    }
    return { rows: [] };
  }
  async end() {
    this.ended = true;
  }
}

function lockWith(t: TestContext, sessions: Array<ScriptedSession | Error>) {
  const log: string[] = [];
  const active: boolean[] = [];
  const slept: number[] = [];
  const notified: string[] = [];
  let stopped = false;
  t.mock.timers.enable({ apis: ['Date'] });
  const lock = new RelayLock({
    connect: async () => {
      const next = sessions.shift();
      if (next === undefined) throw new Error('no more sessions scripted');
      if (next instanceof Error) throw next;
      return next as unknown as DbSession;
    },
    channels: ['a', 'b'],
    onNotification: (channel) => notified.push(channel),
    onActive: (value) => active.push(value),
    sleep: async (ms) => {
      slept.push(ms);
      t.mock.timers.tick(ms);
    },
    stopped: () => stopped,
    log: (line) => log.push(line),
  });
  return { lock, log, active, slept, notified, stop: () => (stopped = true) };
}

test('a standby tries the lock every second until it is granted, then LISTENs and is active', async (t) => {
  const session = new ScriptedSession([false, false, true]);
  const { lock, log, active, slept, notified } = lockWith(t, [session]);
  assert.equal(await lock.acquire(), true);
  assert.deepEqual(slept, [STANDBY_RETRY_MS, STANDBY_RETRY_MS]);
  assert.deepEqual(session.queries.slice(3), ['LISTEN a', 'LISTEN b']);
  assert.deepEqual(active, [true]);
  assert.equal(lock.held, true);
  assert.deepEqual(log, ['active (holds the relay lock)']);
  session.emit('notification', { channel: 'b' });
  assert.deepEqual(notified, ['b']);
  assert.equal(await lock.stillHeld(), true);
  assert.equal(session.queries.at(-1), 'SELECT 1', 'the fencing round trip goes over the lock session');
});

test('a lock session that fails is reported once, however many of its events and round trips say so', async (t) => {
  const session = new ScriptedSession([true]);
  const { lock, log, active } = lockWith(t, [session]);
  await lock.acquire();
  session.broken = new Error('terminating connection due to administrator command');
  assert.equal(await lock.stillHeld(), false);
  session.emit('error', new Error('Connection terminated unexpectedly'));
  session.emit('end');
  assert.equal(await lock.stillHeld(), false);
  assert.equal(lock.held, false);
  assert.deepEqual(active, [true, false]);
  assert.deepEqual(log.slice(1), ['lost the relay lock session (terminating connection due to administrator command); stopped publishing, trying to become active again']);
});

test("a session's end event alone loses the lock; after release its late errors are ignored, and the next session takes over", async (t) => {
  const first = new ScriptedSession([true]);
  const second = new ScriptedSession([true]);
  const { lock, log, active } = lockWith(t, [first, second]);
  await lock.acquire();
  first.emit('end');
  assert.equal(lock.held, false);
  assert.match(log[1], /lost the relay lock session \(connection ended\)/);
  await lock.release();
  assert.equal(first.ended, true);
  first.emit('error', new Error('late'));
  assert.equal(log.length, 2, 'an error of a released session is not reported (nor thrown: it has a listener)');
  assert.equal(await lock.acquire(), true);
  assert.deepEqual(active, [true, false, true]);
  assert.equal(await lock.stillHeld(), true);
});

test('Postgres unreachable: one outage line, a retry a second, one line when it is back', async (t) => {
  const refused = new Error('connect ECONNREFUSED 127.0.0.1:5432');
  const session = new ScriptedSession([true]);
  const { lock, log, slept } = lockWith(t, [refused, refused, refused, session]);
  assert.equal(await lock.acquire(), true);
  assert.deepEqual(slept, [STANDBY_RETRY_MS, STANDBY_RETRY_MS, STANDBY_RETRY_MS]);
  assert.equal(log.length, 3, log.join('\n'));
  assert.match(log[0], /^Postgres \(relay lock session\) unavailable \(connect ECONNREFUSED 127\.0\.0\.1:5432\); retrying to take the relay lock$/);
  assert.match(log[1], /^Postgres \(relay lock session\) back after 3\.0 s \(3 failed attempt\(s\)\)$/);
});

test('a relay that lost its lock steps down for STEP_DOWN_MS; a stopped one neither waits nor takes the lock', async (t) => {
  const session = new ScriptedSession([false]);
  const { lock, slept, stop } = lockWith(t, [session]);
  await lock.stepDown();
  assert.equal(slept.reduce((a, b) => a + b, 0), STEP_DOWN_MS);
  stop();
  slept.length = 0;
  await lock.stepDown();
  assert.deepEqual(slept, []);
  assert.equal(await lock.acquire(), false);
  assert.equal(lock.held, false);
});
