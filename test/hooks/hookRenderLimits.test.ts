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
  await renderBounded(ordinary, { now: 'x', firedBy: 'y' }); // the thread started
  const rounds = 200;
  const t0 = performance.now();
  for (let i = 0; i < rounds; i++) await renderBounded(ordinary, { now: `t${i}`, firedBy: 'y' });
  const perRender = (performance.now() - t0) / rounds;
  console.log(`ordinary template: ${perRender.toFixed(3)} ms a render in the thread`);

  const started = performance.now();
  await assert.rejects(renderBounded(exponential(7, '10'), {}), (err: Error) => err instanceof RenderLimitError && /longer than/.test(err.message));
  const took = performance.now() - started;
  assert.ok(took >= RENDER_TIME_LIMIT_MS - 5 && took < RENDER_TIME_LIMIT_MS + 2000, `stopped after ${took} ms`);

  // a string doubled 23 times: 8 Mi characters in a few milliseconds, over the output limit
  let doubling: Record<string, unknown> = { $eval: 's23' };
  for (let i = 23; i > 0; i--) doubling = { $let: { [`s${i}`]: { $eval: `s${i - 1} + s${i - 1}` } }, in: doubling };
  await assert.rejects(renderBounded({ $let: { s0: 'x' }, in: doubling }, {}), (err: Error) => err instanceof RenderLimitError && err.message.includes(String(RENDER_OUTPUT_LIMIT)));
  // a template error is json-e's, not a limit
  await assert.rejects(renderBounded({ $eval: 'nosuchthing' }, {}), (err: Error) => !(err instanceof RenderLimitError) && /nosuchthing/.test(err.message));
  assert.deepEqual(await renderBounded({ a: '${x}' }, { x: 'after' }), { a: 'after' });
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
