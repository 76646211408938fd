import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import slugid from 'slugid';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { ARTIFACT_CHUNK_BYTES } from '../../src/queue/artifacts.js';
import { streamRequest } from './helpers.js';

const MB = 1024 * 1024;
const MAX = 24 * MB;
let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 1500, maxArtifactBytes: MAX });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown, creds?: Credentials | null) => t.request(method, `/api/queue/v1${path}`, body, creds);

/** A running task's s3 artifact: its putUrl and how to read it back. */
async function artifact(workerType: string, name = 'public/big.bin') {
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType })).status, 200);
  const claim = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId: 'wkr', tasks: 1 });
  const creds = claim.body.tasks[0].credentials as Credentials;
  const expires = new Date(Date.now() + 3600_000).toISOString();
  const created = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'application/octet-stream', expires }, creds);
  assert.equal(created.status, 200, JSON.stringify(created.body));
  return {
    taskId,
    putUrl: created.body.putUrl as string,
    async read(): Promise<Buffer> {
      const get = await q('GET', `/task/${taskId}/runs/0/artifacts/${name}`, undefined, null);
      assert.equal(get.status, 303);
      return Buffer.from(await (await fetch(get.headers.get('location') as string)).arrayBuffer());
    },
    async chunks(): Promise<number[]> {
      const { rows } = await t.db.pool.query<{ len: number }>('SELECT length(data) AS len FROM artifact_data WHERE task_id = $1 ORDER BY seq', [taskId]);
      return rows.map((r) => r.len);
    },
  };
}

test('an upload is streamed into Postgres chunk by chunk and reads back whole', async () => {
  const a = await artifact('up1');
  const size = 20 * MB + 5;
  const res = await streamRequest(a.putUrl, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, totalBytes: size, fill: 0x5a });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const chunks = await a.chunks();
  assert.equal(chunks.length, Math.ceil(size / ARTIFACT_CHUNK_BYTES));
  assert.ok(chunks.every((len) => len <= ARTIFACT_CHUNK_BYTES));
  const data = await a.read();
  assert.equal(data.length, size);
  assert.ok(data.every((b) => b === 0x5a));
  // An empty upload replaces it with one empty chunk: present, zero bytes.
  assert.equal((await fetch(a.putUrl, { method: 'PUT', body: '' })).status, 200);
  assert.deepEqual(await a.chunks(), [0]);
  assert.equal((await a.read()).length, 0);
});

test('a bad or expired signature is refused before a byte of the body is read', async () => {
  const a = await artifact('up2');
  const url = new URL(a.putUrl);
  const badSig = new URL(url);
  badSig.searchParams.set('sig', 'A'.repeat(43));
  const expired = new URL(url);
  expired.searchParams.set('expires', String(Date.now() - 1000));
  for (const target of [badSig, expired]) {
    const res = await streamRequest(target.toString(), { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, totalBytes: 200 * MB });
    assert.equal(res.status, 401, JSON.stringify(res.body));
    assert.equal(res.body.code, 'AuthenticationFailed');
    assert.ok(res.sentWhenAnswered < 100 * MB, `answered after ${res.sentWhenAnswered / MB} MB`);
  }
  assert.deepEqual(await a.chunks(), []);
});

test('an upload over TGS_MAX_ARTIFACT_BYTES is refused (at once when it says so) and keeps the bytes it replaced', async () => {
  const a = await artifact('up3');
  assert.equal((await fetch(a.putUrl, { method: 'PUT', body: 'first version' })).status, 200);
  const declared = await streamRequest(a.putUrl, { method: 'PUT', totalBytes: 200 * MB });
  assert.equal(declared.status, 413, JSON.stringify(declared.body));
  assert.ok(declared.sentWhenAnswered < 100 * MB, `answered after ${declared.sentWhenAnswered / MB} MB`);
  const chunked = await streamRequest(a.putUrl, { method: 'PUT', totalBytes: 200 * MB, chunked: true });
  assert.equal(chunked.status, 413, JSON.stringify(chunked.body));
  assert.equal(chunked.body.code, 'InputTooLarge');
  assert.ok(chunked.sentWhenAnswered < MAX + 64 * MB, `answered after ${chunked.sentWhenAnswered / MB} MB`);
  assert.equal((await a.read()).toString(), 'first version');
});

test('an upload cut off midway leaves the previous bytes', async () => {
  const a = await artifact('up4');
  assert.equal((await fetch(a.putUrl, { method: 'PUT', body: 'complete' })).status, 200);
  await new Promise<void>((resolve) => {
    const req = http.request(a.putUrl, { method: 'PUT', headers: { 'content-length': String(10 * MB) } });
    req.on('error', () => resolve());
    req.write(Buffer.alloc(3 * MB), () => setTimeout(() => {
      req.destroy();
      resolve();
    }, 200));
  });
  // The transaction of the broken upload rolls back: the old bytes stay, once its connection is released.
  for (let i = 0; i < 50 && (await a.chunks()).length !== 1; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal((await a.read()).toString(), 'complete');
});
