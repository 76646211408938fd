import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { createHash } from 'node:crypto';
import { openArtifactData } from '../../src/queue/artifacts.js';
import { outputDifferences, runOutputs } from '../../src/queue/runOutputs.js';

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 1500, maxArtifactBytes: 1024 * 1024 });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown, creds?: Credentials | null) => t.request(method, `/api/queue/v1${path}`, body, creds);
const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

/** A claimed task: its id and the run's temporary credentials. */
async function running(workerType: string): Promise<{ taskId: string; creds: Credentials }> {
  const taskId = slugid.nice();
  const created = await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const claim = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId: 'wkr', tasks: 1 });
  assert.equal(claim.body.tasks[0]?.status.taskId, taskId);
  return { taskId, creds: claim.body.tasks[0].credentials };
}

async function put(url: string, body: string | Buffer, contentType: string) {
  return fetch(url, { method: 'PUT', headers: { 'content-type': contentType }, body });
}

test('s3 artifact: create with run credentials, PUT the bytes, read back through a 303 to a signed URL', async () => {
  const { taskId, creds } = await running('art1');
  const name = 'public/logs/live.log';
  const created = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  assert.equal(created.status, 200, JSON.stringify(created.body));
  assert.equal(created.body.storageType, 's3');
  assert.match(created.body.putUrl, new RegExp(`^${t.rootUrl}/api/queue/v1/artifact-data/${taskId}/0/public/logs/live.log\\?expires=`));

  const before = await q('GET', `/task/${taskId}/runs/0/artifacts/${name}`, undefined, null);
  assert.equal(before.status, 404, 'not uploaded yet');

  assert.equal((await put(created.body.putUrl, 'line 1\n', 'text/plain')).status, 200);
  const get = await q('GET', `/task/${taskId}/runs/0/artifacts/${name}`, undefined, null);
  assert.equal(get.status, 303);
  const location = get.headers.get('location') as string;
  const download = await fetch(location);
  assert.equal(download.status, 200);
  assert.equal(download.headers.get('content-type'), 'text/plain');
  assert.equal(await download.text(), 'line 1\n');
  // HEAD gives the size without the bytes (the UI shows each artifact's size so)
  const head = await fetch(location, { method: 'HEAD' });
  assert.equal(head.status, 200);
  assert.equal(head.headers.get('content-length'), '7');
  assert.equal(head.headers.get('content-type'), 'text/plain');
  assert.equal(await head.text(), '');

  // A live log: created again while running (a fresh putUrl) and re-uploaded, the reader sees the new bytes.
  const again = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  assert.equal(again.status, 200);
  assert.equal((await put(again.body.putUrl, 'line 1\nline 2\n', 'text/plain')).status, 200);
  const latest = await q('GET', `/task/${taskId}/artifacts/${name}`, undefined, null);
  assert.equal(latest.status, 303);
  assert.equal(await (await fetch(latest.headers.get('location') as string)).text(), 'line 1\nline 2\n');

  // One artifact-created message, on the first creation only, with the run's routing key.
  const { rows } = await t.db.pool.query(`SELECT routing_key, payload FROM outbox WHERE exchange = 'queue/v1/artifact-created' AND routing_key LIKE $1`, [`${taskId}.%`]);
  assert.equal(rows.length, 1);
  assert.equal(rows[0].routing_key, `${taskId}.0.grp.wkr.tgs-test.art1.-.${taskId}._`);
  assert.deepEqual(rows[0].payload.artifact, { storageType: 's3', name, expires: rows[0].payload.artifact.expires, contentType: 'text/plain' });
  assert.equal(rows[0].payload.workerGroup, 'grp');
});

test('a download that has sent every recorded byte ends cleanly even if the artifact is uploaded again before its reader asks for more', async () => {
  // A keep-alive client that has its whole answer sends its next request on the same connection; a download that
  // then read on, saw the new version and failed would close that connection under the next request.
  const { taskId, creds } = await running('art-done');
  const name = 'public/done.txt';
  const created = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  assert.equal((await put(created.body.putUrl, 'all of it\n', 'text/plain')).status, 200);
  const data = await openArtifactData(t.db.pool, { taskId, runId: 0, name });
  assert.equal(data?.length, 10);
  assert.equal((await data!.chunks.next()).value?.toString(), 'all of it\n');
  const again = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  assert.equal((await put(again.body.putUrl, 'a new version\n', 'text/plain')).status, 200);
  assert.deepEqual(await data!.chunks.next(), { done: true, value: undefined });
});

test('binary and JSON bodies are stored byte for byte; %2F-encoded names work as well', async () => {
  const { taskId, creds } = await running('art2');
  const bytes = Buffer.from([0, 1, 2, 253, 254, 255, 10, 13]);
  const bin = await q('POST', `/task/${taskId}/runs/0/artifacts/public%2Fbuild%2Fout.bin`, { storageType: 's3', contentType: 'application/octet-stream', expires: inAnHour() }, creds);
  assert.equal(bin.status, 200, JSON.stringify(bin.body));
  assert.equal((await put(bin.body.putUrl, bytes, 'application/octet-stream')).status, 200);
  const json = await q('POST', `/task/${taskId}/runs/0/artifacts/public/not-json.json`, { storageType: 's3', contentType: 'application/json', expires: inAnHour() }, creds);
  assert.equal((await put(json.body.putUrl, '{"broken": ', 'application/json')).status, 200, 'artifact bytes are not parsed');

  const got = await q('GET', `/task/${taskId}/runs/0/artifacts/public/build/out.bin`, undefined, null);
  assert.deepEqual(Buffer.from(await (await fetch(got.headers.get('location') as string)).arrayBuffer()), bytes);
  const gotJson = await q('GET', `/task/${taskId}/runs/0/artifacts/public/not-json.json`, undefined, null);
  assert.equal(await (await fetch(gotJson.headers.get('location') as string)).text(), '{"broken": ');
});

test('reference and error artifacts; private artifacts need queue:get-artifact:<name>', async () => {
  const { taskId, creds } = await running('art3');
  const ref = await q('POST', `/task/${taskId}/runs/0/artifacts/public/docs`, { storageType: 'reference', url: 'https://example.com/docs', expires: inAnHour() }, creds);
  assert.equal(ref.status, 200, JSON.stringify(ref.body));
  const readRef = await q('GET', `/task/${taskId}/runs/0/artifacts/public/docs`, undefined, null);
  assert.equal(readRef.status, 303);
  assert.equal(readRef.headers.get('location'), 'https://example.com/docs');
  // a reference may be pointed elsewhere
  await q('POST', `/task/${taskId}/runs/0/artifacts/public/docs`, { storageType: 'reference', url: 'https://example.com/v2', expires: inAnHour() }, creds);
  assert.equal((await q('GET', `/task/${taskId}/runs/0/artifacts/public/docs`, undefined, null)).headers.get('location'), 'https://example.com/v2');

  const err = await q('POST', `/task/${taskId}/runs/0/artifacts/public/missing.txt`, { storageType: 'error', reason: 'file-missing-on-worker', message: 'no such file: missing.txt', expires: inAnHour() }, creds);
  assert.equal(err.status, 200);
  const readErr = await q('GET', `/task/${taskId}/runs/0/artifacts/public/missing.txt`, undefined, null);
  assert.equal(readErr.status, 424);
  assert.match(readErr.body.message, /no such file: missing.txt/);
  const content = await q('GET', `/task/${taskId}/runs/0/artifact-content/public/docs`, undefined, null);
  assert.deepEqual(content.body, { storageType: 'reference', url: 'https://example.com/v2' });

  const secret = await q('POST', `/task/${taskId}/runs/0/artifacts/private/secret.txt`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  await put(secret.body.putUrl, 'hush', 'text/plain');
  const anonymous = await q('GET', `/task/${taskId}/runs/0/artifacts/private/secret.txt`, undefined, null);
  assert.equal(anonymous.status, 403);
  assert.match(anonymous.body.message, /queue:get-artifact:private\/secret.txt/);
  const withRoot = await q('GET', `/task/${taskId}/runs/0/artifacts/private/secret.txt`);
  assert.equal(withRoot.status, 303);
});

test('a reference is http(s) only: other schemes are refused, and a stored one is never redirected to', async () => {
  const { taskId, creds } = await running('art-ref');
  for (const url of ['javascript:alert(document.domain)', 'data:text/html,<script>alert(1)</script>', 'ftp://example.com/x', 'file:///etc/passwd', 'https:/no-host', 'vbscript:msgbox']) {
    const res = await q('POST', `/task/${taskId}/runs/0/artifacts/public/go`, { storageType: 'reference', url, expires: inAnHour() }, creds);
    assert.equal(res.status, 400, `${url}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'InputValidationError', url);
  }
  assert.equal((await q('GET', `/task/${taskId}/runs/0/artifacts/public/go`, undefined, null)).status, 404, 'nothing was stored');
  const ok = await q('POST', `/task/${taskId}/runs/0/artifacts/public/go`, { storageType: 'reference', url: 'HTTP://example.com/ok', expires: inAnHour() }, creds);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  // a row stored before the rule (or written around the API) is refused at read time, not followed
  await t.db.pool.query(`UPDATE artifacts SET details = jsonb_set(details, '{url}', '"javascript:alert(1)"') WHERE task_id = $1 AND name = 'public/go'`, [taskId]);
  for (const path of [`/task/${taskId}/runs/0/artifacts/public/go`, `/task/${taskId}/artifacts/public/go`, `/task/${taskId}/runs/0/artifact-content/public/go`]) {
    const read = await q('GET', path, undefined, null);
    assert.equal(read.status, 424, `${path}: ${read.status} ${JSON.stringify(read.body)}`);
    assert.equal(read.headers.get('location'), null, path);
  }
});

test('conflicts and refusals: different re-creation, expires after the task, resolved run, other run credentials, tampered URL, too large', async () => {
  const { taskId, creds } = await running('art4');
  const name = 'public/a.txt';
  await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  const different = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/html', expires: inAnHour() }, creds);
  assert.equal(different.status, 409);
  assert.equal(different.body.code, 'RequestConflict');

  const tooLate = await q('POST', `/task/${taskId}/runs/0/artifacts/public/b.txt`, { storageType: 's3', contentType: 'text/plain', expires: new Date(Date.now() + 3 * 365 * 86400_000).toISOString() }, creds);
  assert.equal(tooLate.status, 400);
  assert.match(tooLate.body.message, /after the task/);

  const badBody = await q('POST', `/task/${taskId}/runs/0/artifacts/public/c.txt`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour(), extra: 1 }, creds);
  assert.equal(badBody.status, 400);

  const other = await running('art4');
  const foreign = await q('POST', `/task/${taskId}/runs/0/artifacts/public/d.txt`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, other.creds);
  assert.equal(foreign.status, 403);

  const created = await q('POST', `/task/${taskId}/runs/0/artifacts/public/e.txt`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  const tampered = (created.body.putUrl as string).replace('public/e.txt', 'public/a.txt');
  assert.equal((await put(tampered, 'x', 'text/plain')).status, 401);
  const big = await put(created.body.putUrl, Buffer.alloc(1024 * 1024 + 1), 'text/plain');
  assert.equal(big.status, 413);
  assert.equal(((await big.json()) as { code: string }).code, 'InputTooLarge');

  assert.equal((await q('POST', `/task/${taskId}/runs/0/completed`, undefined, creds)).status, 200);
  const afterResolve = await q('POST', `/task/${taskId}/runs/0/artifacts/public/f.txt`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
  assert.equal(afterResolve.status, 409);
  assert.match(afterResolve.body.message, /completed/);
  const { rows } = await t.db.pool.query('SELECT count(*)::int AS n FROM artifacts WHERE task_id = $1', [taskId]);
  assert.equal(rows[0].n, 2, 'refused requests wrote nothing');
});

test('list artifacts of a run and of the latest run, paged with continuationToken', async () => {
  const { taskId, creds } = await running('art5');
  const names = Array.from({ length: 5 }, (_, i) => `public/f${i}.txt`);
  for (const name of names) {
    const res = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
    assert.equal(res.status, 200);
  }
  const seen: string[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const res = await q('GET', `/task/${taskId}/runs/0/artifacts?limit=2${token ? `&continuationToken=${token}` : ''}`, undefined, null);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    seen.push(...res.body.artifacts.map((a: { name: string }) => a.name));
    token = res.body.continuationToken;
    pages++;
  } while (token);
  assert.deepEqual(seen, names);
  assert.equal(pages, 3);
  const latest = await q('GET', `/task/${taskId}/artifacts`, undefined, null);
  assert.equal(latest.body.artifacts.length, 5);
  assert.equal((await q('GET', `/task/${taskId}/runs/1/artifacts`, undefined, null)).status, 404);
  const info = await q('GET', `/task/${taskId}/artifact-info/public/f0.txt`, undefined, null);
  assert.equal(info.body.contentType, 'text/plain');
  const noRuns = slugid.nice();
  await q('PUT', `/task/${noRuns}`, { ...fastTask('t'), workerType: 'art5b', dependencies: [taskId] });
  assert.equal((await q('GET', `/task/${noRuns}/artifacts`, undefined, null)).status, 404);
});

test('each upload keeps the sha256 of its bytes; runs compare by them, their logs aside (the early cutoff)', async () => {
  const bytes = Buffer.alloc(1024 * 1024, 7); // a whole chunk: the digest spans chunk boundaries
  const upload = async (output: Buffer, log: string) => {
    const { taskId, creds } = await running('digest');
    for (const [name, body] of [['public/logs/live.log', Buffer.from(log)], ['public/out.bin', output]] as const) {
      const created = await q('POST', `/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'application/octet-stream', expires: inAnHour() }, creds);
      assert.equal((await put(created.body.putUrl, body, 'application/octet-stream')).status, 200);
    }
    return taskId;
  };
  const a = await upload(bytes, 'run a at 10:00');
  const b = await upload(Buffer.from(bytes), 'run b at 10:05');
  const c = await upload(Buffer.concat([bytes.subarray(1), Buffer.from([8])]), 'run c');
  const { rows } = await t.db.pool.query<{ sha256: Buffer }>("SELECT sha256 FROM artifacts WHERE task_id = $1 AND name = 'public/out.bin'", [a]);
  assert.deepEqual(rows[0].sha256, createHash('sha256').update(bytes).digest());
  const outputs = (taskId: string) => runOutputs(t.db.pool, taskId, 0);
  assert.deepEqual(outputDifferences(await outputs(a), await outputs(b)), [], 'the same bytes, different logs: the same outputs');
  assert.deepEqual(outputDifferences(await outputs(a), await outputs(c)), ['public/out.bin']);
  // an artifact created but never uploaded never compares equal, not even to itself
  const { taskId: d, creds } = await running('digest');
  await q('POST', `/task/${d}/runs/0/artifacts/public/out.bin`, { storageType: 's3', contentType: 'application/octet-stream', expires: inAnHour() }, creds);
  assert.deepEqual(outputDifferences(await outputs(d), await outputs(d)), ['public/out.bin']);
});
