import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import slugid from 'slugid';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { ApiClient } from '../../src/client/http.js';
import { startApiProcess, type ApiProcess } from '../helpers/apiProcess.js';
import { memoryOf, streamRequest } from './helpers.js';
import { freePort } from '../../src/temporal/devServer.js';

/*
 * Artifact downloads are streamed a stored chunk at a time: the API's memory does not grow with the artifact's
 * size times the downloads in flight. Measured on a real `tgs api` child process, so the figure is its own.
 * Before: eight anonymous downloads of one 64 MiB artifact took it from 128 to 996 MiB.
 */
const MB = 1024 * 1024;
const SIZE = 64 * MB;
let db: TestDatabase;
let api: ApiProcess;
let root: ApiClient;
let downloadUrl: string;
let digest: string;

before(async () => {
  db = await createTestDatabase();
  // a fixed port: the upload and download URLs the API signs are built from its root URL
  const port = await freePort();
  api = await startApiProcess(db.url, { PORT: String(port), TGS_ROOT_URL: `http://127.0.0.1:${port}` });
  root = new ApiClient(api.rootUrl, api.root);
  const taskId = slugid.nice();
  await root.request('queue', 'PUT', `/task/${taskId}`, { ...fastTask('big'), workerType: 'downloads' });
  const claim = await root.request<{ tasks: { credentials: { clientId: string; accessToken: string; certificate: string } }[] }>(
    'queue', 'POST', '/claim-work/tgs-test/downloads', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  const run = new ApiClient(api.rootUrl, claim.tasks[0].credentials);
  const created = await run.request<{ putUrl: string }>('queue', 'POST', `/task/${taskId}/runs/0/artifacts/public/big.bin`, {
    storageType: 's3', contentType: 'application/octet-stream', expires: new Date(Date.now() + 3600_000).toISOString(),
  });
  const upload = await streamRequest(created.putUrl, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, totalBytes: SIZE, fill: 0x5a });
  assert.equal(upload.status, 200, JSON.stringify(upload.body));
  digest = createHash('sha256').update(Buffer.alloc(SIZE, 0x5a)).digest('hex');
  const redirect = await fetch(`${api.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/big.bin`, { redirect: 'manual' });
  assert.equal(redirect.status, 303);
  downloadUrl = redirect.headers.get('location') as string;
});
after(async () => {
  api?.child.kill('SIGTERM');
  await api?.exited;
  await db?.drop();
});

/** Downloads the whole artifact, hashing it as it arrives (the test never holds it). */
async function download(): Promise<{ status: number; length: string | null; bytes: number; sha256: string }> {
  const res = await fetch(downloadUrl);
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { status: res.status, length: res.headers.get('content-length'), bytes, sha256: hash.digest('hex') };
}

test('eight concurrent anonymous downloads of a 64 MiB artifact: every byte arrives, and the API grows by less than half of what holding them needs', async (ctx) => {
  assert.equal((await download()).sha256, digest, 'warm-up download');
  const before = await memoryOf(api.child.pid as number);
  let peak = before.rss;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, (await memoryOf(api.child.pid as number)).rss);
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const results = await Promise.all(Array.from({ length: 8 }, download));
  sampling = false;
  await sampler;
  for (const r of results) assert.deepEqual(r, { status: 200, length: String(SIZE), bytes: SIZE, sha256: digest });
  const grown = (peak - before.rss) / MB;
  ctx.diagnostic(`API RSS ${(before.rss / MB).toFixed(0)} MiB before, peak ${(peak / MB).toFixed(0)} MiB during 8 downloads of ${SIZE / MB} MiB (+${grown.toFixed(0)} MiB)`);
  // Held whole, eight concurrent downloads need 8 × 64 = 512 MiB of buffers at once (measured: +868 MiB).
  // Streamed, a chunk each (1 MiB, read as 2 MiB of hex text) plus socket buffers and the garbage the GC has
  // not taken yet: +76 to +157 MiB here.
  assert.ok(grown < 256, `the API grew by ${grown.toFixed(0)} MiB`);
});

test('a download whose artifact is uploaded again midway ends with an error instead of mixing two versions', async () => {
  const res = await fetch(downloadUrl);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const first = await reader.read();
  assert.ok(first.value && first.value.length > 0);
  // a new version: the artifact row changes (its final UPDATE), and its chunks are replaced
  await db.pool.query(`UPDATE artifacts SET details = details || '{"contentLength": 3}' WHERE name = 'public/big.bin'`);
  await assert.rejects(async () => {
    for (;;) if ((await reader.read()).done) break;
  });
});
