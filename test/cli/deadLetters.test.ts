import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { outboxCount, type TestDatabase } from '../../support/db.js';
import { eventually } from '../../support/stack.js';
import type { Config } from '../../src/config.js';
import { relayTestDatabase } from '../helpers/outbox.js';
import { enqueueMessages } from '../../src/exchanges/outbox.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import { startRelay } from '../../src/relay/relay.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

let db: TestDatabase;
let config: Config;
before(async () => ({ db, config } = await relayTestDatabase()));
after(() => db.drop());

/** `tgs <args>` from source against the test's database. */
function tgs(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', ...args],
      { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATABASE_URL: db.url }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('tgs dead-letters lists what the relay set aside, replays a mended row (the relay publishes it), drops one, and refuses bad ids before doing anything', async (t) => {
  const exchange = queueExchangeName(config.exchangePrefix, 'task-completed');
  const relay = await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined });
  t.after(() => relay.stop());
  await enqueueMessages(db.pool, [
    { exchange, routingKey: `${'k'.repeat(260)}`, payload: {}, messageId: 'too-long' },
    { exchange: `${config.exchangePrefix}nowhere`, routingKey: 'x', payload: {}, messageId: 'nowhere' },
    { exchange, routingKey: 'fine', payload: {}, messageId: 'fine' },
  ]);
  await eventually(async () => relay.stats.deadLettered === 2 && relay.stats.published === 1, 'two rows set aside, one published');

  const list = await tgs(['dead-letters', 'list']);
  assert.equal(list.code, 0, list.stderr);
  const lines = list.stdout.trim().split('\n').map((line) => line.split('\t'));
  assert.deepEqual(lines.map((l) => l[2]), ['too-long', 'nowhere']);
  assert.match(lines[0][5], /routing key is 260 bytes long/);
  assert.equal(lines[1][3], `${config.exchangePrefix}nowhere`);
  assert.match(list.stderr, /2 dead letter\(s\)/);
  const [tooLong, nowhere] = lines.map((l) => Number(l[0]));

  const bad = await tgs(['dead-letters', 'replay', String(tooLong), '1;DROP TABLE outbox']);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /not a dead letter id: "1;DROP TABLE outbox"/);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM outbox_dead_letters')).rows[0].n, 2, 'nothing replayed');

  await db.pool.query(`UPDATE outbox_dead_letters SET routing_key = 'mended' WHERE id = $1`, [tooLong]);
  const replay = await tgs(['dead-letters', 'replay', String(tooLong), '999999']);
  assert.equal(replay.code, 1, 'an id that is not there fails the command');
  assert.match(replay.stdout, new RegExp(`replayed 1 dead letter\\(s\\): ${tooLong}`));
  assert.match(replay.stderr, /no dead letter 999999/);
  await eventually(async () => relay.stats.published === 2 && (await outboxCount(db.pool)) === 0, 'the replayed row published');

  const drop = await tgs(['dead-letters', 'drop', String(nowhere)]);
  assert.equal(drop.code, 0, drop.stderr);
  assert.match(drop.stdout, new RegExp(`dropped 1 dead letter\\(s\\): ${nowhere}`));
  const empty = await tgs(['dead-letters', 'list', '--json']);
  assert.equal(empty.stdout, '');
  assert.equal(relay.stats.deadLettered, 2, 'nothing set aside again');
});
