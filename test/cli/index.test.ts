import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

/** `tgs <args>` from source, with only the variables given (plus PATH/HOME for node). */
function tgs(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', ...args],
      { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('index find prints the indexed task without credentials (the anonymous role reads the index); a bad or empty path says so', async () => {
  const taskId = slugid.nice();
  const expires = new Date(Date.now() + 3600_000).toISOString();
  const put = await t.request('PUT', '/api/index/v1/task/cli.project.latest', { taskId, rank: 4, data: { revision: 'abc' }, expires });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  const found = await tgs(['index', 'find', 'cli.project.latest'], { TGS_ROOT_URL: t.rootUrl });
  assert.equal(found.code, 0, found.stderr);
  assert.match(found.stdout, new RegExp(`taskId\\s+${taskId}`));
  assert.match(found.stdout, /rank\s+4/);
  assert.match(found.stdout, /data\s+\{"revision":"abc"\}/);
  const json = await tgs(['index', 'find', 'cli.project.latest', '--json'], { TGS_ROOT_URL: t.rootUrl });
  assert.equal(JSON.parse(json.stdout).taskId, taskId);
  const missing = await tgs(['index', 'find', 'cli.project.none'], { TGS_ROOT_URL: t.rootUrl });
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /nothing is indexed at cli\.project\.none/);
  const bad = await tgs(['index', 'find', 'cli..bad'], { TGS_ROOT_URL: t.rootUrl });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /Invalid index path "cli\.\.bad"/);
});

test('index list shows the namespaces and the tasks under a namespace, the root without one', async () => {
  const expires = new Date(Date.now() + 3600_000).toISOString();
  const ids = [slugid.nice(), slugid.nice()];
  for (const [i, path] of ['listing.app.v1', 'listing.app.v2'].entries()) {
    const put = await t.request('PUT', `/api/index/v1/task/${path}`, { taskId: ids[i], rank: i, data: {}, expires });
    assert.equal(put.status, 200, JSON.stringify(put.body));
  }
  await t.request('PUT', '/api/index/v1/task/listing.lib.latest', { taskId: slugid.nice(), rank: 0, data: {}, expires });
  const env = { TGS_ROOT_URL: t.rootUrl };
  const root = await tgs(['index', 'list'], env);
  assert.equal(root.code, 0, root.stderr);
  assert.match(root.stdout, /^listing\.\s+-/m);
  const top = await tgs(['index', 'list', 'listing'], env);
  assert.match(top.stdout, /^NAME\s+TASK ID\s+RANK\s+EXPIRES$/m);
  assert.match(top.stdout, /^listing\.app\.\s+-\s+-/m);
  assert.match(top.stdout, /^listing\.lib\.\s+-\s+-/m);
  const app = await tgs(['index', 'list', 'listing.app'], env);
  assert.match(app.stdout, new RegExp(`^listing\\.app\\.v1\\s+${ids[0]}\\s+0\\s`, 'm'));
  assert.match(app.stdout, new RegExp(`^listing\\.app\\.v2\\s+${ids[1]}\\s+1\\s`, 'm'));
  const json = JSON.parse((await tgs(['index', 'list', 'listing.app', '--json'], env)).stdout) as { tasks: { taskId: string }[] };
  assert.deepEqual(json.tasks.map((x) => x.taskId), ids);
  const empty = await tgs(['index', 'list', 'listing.none'], env);
  assert.equal(empty.code, 0, empty.stderr);
  assert.match(empty.stdout, /nothing is indexed under listing\.none/);
  const bad = await tgs(['index', 'list', 'listing..x'], env);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /Invalid namespace "listing\.\.x"/);
});
