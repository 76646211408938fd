import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { renderBounded, RenderLimitError, RENDER_OUTPUT_LIMIT, RENDER_TIME_LIMIT_MS } from '../../src/hooks/boundedJsone.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

/*
 * A hostile template is bounded (src/hooks/boundedJsone.ts): one that expands exponentially is stopped at the time
 * limit, one that renders too much is refused, and the renderer works on afterwards. The API refuses such a template
 * when the hook is written (400), and a template that explodes only with a fire's payload is recorded as a failed fire.
 */

/** `levels` nested `$map`s over `range(0, <width>)`: width^levels elements. Seven levels of 10 ran over 60 s unbounded. */
function exponential(levels: number, width: string): Record<string, unknown> {
  let t: Record<string, unknown> = { $eval: `range(0, ${width})` };
  for (let i = 0; i < levels; i++) t = { $map: { $eval: `range(0, ${width})` }, 'each(i)': t };
  return t;
}

let api: TestApi;
before(async () => {
  api = await startTestApi();
});
after(async () => {
  await api?.close();
});

test('an exponential template is stopped at the time limit; too large an output is refused; the renderer goes on', async () => {
  const ordinary = { ...fastTask('ordinary'), payload: { at: '${now}', who: '${firedBy}' } };
  await renderBounded(ordinary, { now: 'x', firedBy: 'y' }, 'limits/one'); // the thread started
  const rounds = 200;
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) await renderBounded(ordinary, { now: `t${i}`, firedBy: 'y' }, 'limits/one');
  const perRender = (performance.now() - t0) / rounds;
  console.log(`ordinary template: ${perRender.toFixed(3)} ms a render in the thread`);

  const started = performance.now();
  await assert.rejects(renderBounded(exponential(7, '10'), {}, 'limits/one'), (err: Error) => err instanceof RenderLimitError && /longer than/.test(err.message));
  const took = performance.now() - started;
  assert.ok(took >= RENDER_TIME_LIMIT_MS - 5 && took < RENDER_TIME_LIMIT_MS + 2000, `stopped after ${took} ms`);

  // a string doubled 23 times: 8 Mi characters in a few milliseconds, over the output limit
  let doubling: Record<string, unknown> = { $eval: 's23' };
  for (let i = 23; i > 0; i--) doubling = { $let: { [`s${i}`]: { $eval: `s${i - 1} + s${i - 1}` } }, in: doubling };
  await assert.rejects(renderBounded({ $let: { s0: 'x' }, in: doubling }, {}, 'limits/one'), (err: Error) => err instanceof RenderLimitError && err.message.includes(String(RENDER_OUTPUT_LIMIT)));
  // a template error is json-e's, not a limit
  await assert.rejects(renderBounded({ $eval: 'nosuchthing' }, {}, 'limits/one'), (err: Error) => !(err instanceof RenderLimitError) && /nosuchthing/.test(err.message));
  assert.deepEqual(await renderBounded({ a: '${x}' }, { x: 'after' }, 'limits/one'), { a: 'after' });
});

test('the API refuses an exponential template at create and update; one that explodes with a payload fails its fire, recorded', async () => {
  const metadata = { name: 'bomb', description: 'exponential', owner: 'hooks@example.com' };
  const path = '/api/hooks/v1/hooks/limits/bomb';
  const refused = await api.request('PUT', path, { metadata, task: exponential(7, '10') });
  assert.equal(refused.status, 400, JSON.stringify(refused.body));
  assert.equal(refused.body.code, 'InputError');
  assert.match(refused.body.message, /took longer than/);
  assert.equal((await api.request('GET', path)).status, 404);

  // fine with an empty payload (payload.n is missing: a template error, which only a fire judges), exponential with n
  const task = { $let: { n: { $eval: 'payload.n' } }, in: { ...fastTask('bomb'), payload: { boom: exponential(7, 'n') } } };
  const created = await api.request('PUT', path, { metadata, task, triggerSchema: { type: 'object' } });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const update = await api.request('POST', path, { metadata, task: exponential(7, '10'), triggerSchema: { type: 'object' } });
  assert.equal(update.status, 400);
  assert.match(update.body.message, /took longer than/);

  const fired = await api.request('POST', `${path}/trigger`, { n: 10 });
  assert.equal(fired.status, 400, JSON.stringify(fired.body));
  assert.match(fired.body.message, /While firing hook:[\s\S]*took longer than/);
  const { lastFires } = (await api.request('GET', `${path}/last-fires`)).body;
  assert.equal(lastFires.length, 1);
  assert.equal(lastFires[0].result, 'error');
  assert.match(lastFires[0].error, /took longer than/);
  // and the API serves on
  assert.equal((await api.request('GET', path)).status, 200);
});

test('security review 2026-11-28 #4: a triggerSchema `pattern` runs on RE2, so the review\'s anonymous 38-byte trigger is refused at once and stalls nothing', async () => {
  const path = '/api/hooks/v1/hooks/limits/redos';
  const metadata = { name: 'redos', description: 'a catastrophic pattern', owner: 'hooks@example.com' };
  const lookaround = await api.request('PUT', path, { metadata, task: fastTask('redos'), triggerSchema: { properties: { x: { type: 'string', pattern: '^(?=a)a$' } } } });
  assert.equal(lookaround.status, 400, 'a pattern RE2 cannot run is refused when the hook is written');
  assert.match(lookaround.body.message, /triggerSchema is not a valid JSON schema/);
  assert.equal(
    (await api.request('PUT', path, { metadata, task: fastTask('redos'), triggerSchema: { properties: { x: { type: 'string', pattern: '^(a+)+$' } } } })).status,
    200,
  );
  const { token } = (await api.request('GET', `${path}/token`)).body as { token: string };
  // 30 `a`s and a `!`: about 46 s of backtracking on JavaScript's engine (the review's 29 took 23 s), the API stalled
  const started = performance.now();
  const [refused, ping] = await Promise.all([
    api.request('POST', `${path}/trigger/${token}`, { x: `${'a'.repeat(30)}!` }, null),
    api.request('GET', '/api/queue/v1/ping', undefined, null),
  ]);
  const took = performance.now() - started;
  assert.equal(refused.status, 400);
  assert.match(refused.body.message, /does not match the hook's triggerSchema/);
  assert.equal(ping.status, 200);
  // a bound 10 times the 0.5 s both take on a loaded machine, and 9 times under the backtracking engine's time
  assert.ok(took < 5000, `the trigger and a ping took ${took} ms`);
  // what the bridge's listener runs on a message: a 60,000-character string is matched in linear time
  const { checkTriggerPayload } = await import('../../src/hooks/triggerSchema.js');
  assert.throws(() => checkTriggerPayload({ properties: { x: { type: 'string', pattern: '^(a+)+$' } } }, { x: `${'a'.repeat(60_000)}!` }), /does not match/);
  assert.equal((await api.request('DELETE', path)).status, 200);
});

test('security review 2026-11-28 #8: a hook whose renders each take the full second holds one renderer; a burst past its queue is 429, another hook fires at once', async () => {
  await api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:limits/*')}`, {
    description: 'limits hooks',
    scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'],
  });
  const metadata = { name: 'slow', description: 'renders for a second with a payload', owner: 'hooks@example.com' };
  // the review's shape: fine with the write-time check's empty payload, a full second with `n`
  const slow = { $if: "'n' in payload", then: { ...fastTask('slow'), payload: { boom: exponential(7, 'payload.n') } } };
  assert.equal((await api.request('PUT', '/api/hooks/v1/hooks/limits/slow', { metadata, task: slow, triggerSchema: { type: 'object' } })).status, 200);
  assert.equal((await api.request('PUT', '/api/hooks/v1/hooks/limits/quick', { metadata: { ...metadata, name: 'quick' }, task: fastTask('quick'), triggerSchema: { type: 'object' } })).status, 200);
  const { token } = (await api.request('GET', '/api/hooks/v1/hooks/limits/slow/token')).body as { token: string };

  const order: string[] = [];
  const burst = Array.from({ length: 20 }, () =>
    api.request('POST', `/api/hooks/v1/hooks/limits/slow/trigger/${token}`, { n: 10 }, null).then((res) => {
      order.push(`slow ${res.status}`);
      return res;
    }),
  );
  // the burst reached the renderers: the first render runs, four wait, the others are refused
  await new Promise((resolve) => setTimeout(resolve, 200));
  const quick = await api.request('POST', '/api/hooks/v1/hooks/limits/quick/trigger', {});
  order.push(`quick ${quick.status}`);
  assert.equal(quick.status, 200, JSON.stringify(quick.body));
  const statuses = (await Promise.all(burst)).map((r) => r.status);
  // one running and four waiting at a time: a request arriving after the first render ended may take the freed place
  const refusedCount = statuses.filter((s) => s === 429).length;
  assert.ok(refusedCount >= 10 && statuses.every((s) => s === 400 || s === 429), statuses.join(' '));
  // the quick hook did not wait behind the slow hook's renders (each a second): it answered before the second of them
  const settled = order.filter((o) => o !== 'slow 429');
  assert.ok(settled.indexOf('quick 200') <= 1, order.join(', '));
  const refused = (await Promise.all(burst)).find((r) => r.status === 429)!;
  assert.equal(refused.body.code, 'TooManyRequests');
  assert.ok(refused.headers.get('retry-after'));
});
