import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { startTestTemporal } from '../../support/temporal.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

let t: TestApi;
let temporal: DevServer;
before(async () => {
  temporal = await startTestTemporal();
  t = await startTestApi({ temporalAddress: temporal.address });
  const role = await t.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:cli/*')}`, { description: 'cli hooks', scopes: ['queue:create-task:lowest:tgs-cli/hooks', 'queue:scheduler-id:-'] });
  assert.equal(role.status, 200, JSON.stringify(role.body));
});
after(async () => {
  await t?.close();
  await temporal?.stop();
});

/** `tgs <args>` from source, as root. */
function tgs(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken };
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', ...args], { cwd: repo, env, timeout: 60_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('tgs hook: create from YAML, list, show, trigger, fires, pause, policy, remove; mistakes say what to do', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tgs-hook-cli-'));
  const file = join(dir, 'nightly.yaml');
  writeFileSync(
    file,
    [
      'metadata: {name: nightly build, description: every night, owner: builds@example.com}',
      'schedule: ["0 0 2 * * *"]',
      'task:',
      '  provisionerId: tgs-cli',
      '  workerType: hooks',
      '  payload: {firedBy: "${firedBy}"}',
      '  metadata: {name: "nightly ${firedBy}", description: from a hook, owner: builds@example.com, source: "https://example.com"}',
    ].join('\n'),
  );
  const created = await tgs(['hook', 'create', 'cli/nightly/build', file]);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /schedule\s+0 0 2 \* \* \*/);
  assert.match(created.stdout, /next fires\s+\S+T02:00:00\.000Z/);

  assert.deepEqual((await tgs(['hook', 'list'])).stdout.trim().split('\n'), ['cli']);
  assert.match((await tgs(['hook', 'list', 'cli'])).stdout, /^cli\/nightly\/build {2}0 0 2 \* \* \* {2}nightly build$/m);
  assert.match((await tgs(['hook', 'show', 'cli/nightly/build'])).stdout, /paused\s+no/);

  const fired = await tgs(['hook', 'trigger', 'cli/nightly/build']);
  assert.equal(fired.code, 0, fired.stderr);
  const taskId = /created task (\S+)/.exec(fired.stdout)?.[1];
  assert.ok(taskId, fired.stdout);
  assert.match((await tgs(['hook', 'fires', 'cli/nightly/build'])).stdout, new RegExp(`triggerHook\\s+${taskId}\\s+pending`));

  assert.match((await tgs(['hook', 'pause', 'cli/nightly/build'])).stdout, /paused\s+yes/);
  const policy = await tgs(['hook', 'policy', 'cli/nightly/build', '--overlap', 'skip', '--catchup-window', '10m']);
  assert.equal(policy.code, 0, policy.stderr);
  assert.match(policy.stdout, /overlap\s+SKIP/);
  assert.match(policy.stdout, /catch-up window 600 s/);

  const badPayload = await tgs(['hook', 'trigger', 'cli/nightly/build', '--payload', '{"unexpected": 1}']);
  assert.equal(badPayload.code, 1);
  assert.match(badPayload.stderr, /triggerSchema/);
  const badRef = await tgs(['hook', 'show', 'nightly']);
  assert.equal(badRef.code, 1);
  assert.match(badRef.stderr, /<hookGroupId>\/<hookId>/);
  const badFile = await tgs(['hook', 'create', 'cli/other', join(dir, 'missing.yaml')]);
  assert.equal(badFile.code, 1);
  assert.match(badFile.stderr, /no such file/);

  assert.equal((await tgs(['hook', 'remove', 'cli/nightly/build'])).code, 0);
  const gone = await tgs(['hook', 'show', 'cli/nightly/build']);
  assert.equal(gone.code, 1);
  assert.match(gone.stderr, /No such hook/);
});

test('hook create warns of a template JSON-e cannot render and of a role without the scopes, printing the grant; fire errors print as text', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tgs-hook-cli-'));
  const hook = (name: string, command: string) => {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(
      file,
      [
        'metadata: {name: heartbeat, description: a beat, owner: ux@example.com}',
        'schedule: []',
        'task:',
        '  provisionerId: tgs-cli',
        '  workerType: beats',
        `  payload: {command: ${JSON.stringify(command)}, maxRunTime: 60}`,
        '  metadata: {name: beat, description: from a hook, owner: ux@example.com, source: "https://example.com"}',
      ].join('\n'),
    );
    return file;
  };
  const shellVariable = await tgs(['hook', 'create', 'ux/shell', hook('shell', 'echo ${FIRED_BY}')]);
  assert.equal(shellVariable.code, 0, shellVariable.stderr);
  assert.match(shellVariable.stderr, /tgs: warning: its task template does not render .*write `\$\$\{VAR\}` to keep `\$\{VAR\}` for the shell/);

  const noRole = await tgs(['hook', 'create', 'ux/heartbeat', hook('beat', 'echo $${FIRED_BY}')]);
  assert.equal(noRole.code, 0, noRole.stderr);
  assert.doesNotMatch(noRole.stderr, /does not render/);
  assert.match(noRole.stderr, /the role hook-id:ux\/heartbeat, which lacks queue:scheduler-id:-, queue:create-task:lowest:tgs-cli\/beats: every fire would be refused/);
  const grant = /^ {2}(tgs role grant .*)$/m.exec(noRole.stderr)?.[1] as string;
  assert.equal(grant, 'tgs role grant hook-id:ux/heartbeat queue:scheduler-id:- queue:create-task:lowest:tgs-cli/beats');

  // a fire before the grant is refused: its error prints as text, one line per line
  const refused = await tgs(['hook', 'trigger', 'ux/heartbeat']);
  assert.equal(refused.code, 1);
  const fires = await tgs(['hook', 'fires', 'ux/heartbeat']);
  assert.match(fires.stdout, /triggerHook\s+\S{22}\s+error:\n {4}\S/);
  assert.doesNotMatch(fires.stdout, /\\n|"message"/);

  const granted = await tgs(grant.split(' ').slice(1));
  assert.equal(granted.code, 0, granted.stderr);
  const again = await tgs(['hook', 'update', 'ux/heartbeat', hook('beat', 'echo $${FIRED_BY}')]);
  assert.equal(again.code, 0, again.stderr);
  assert.equal(again.stderr, '', 'no warning once the role grants what the task needs');
  const fired = await tgs(['hook', 'trigger', 'ux/heartbeat']);
  assert.equal(fired.code, 0, fired.stderr);
  const taskId = /created task (\S+)/.exec(fired.stdout)?.[1] as string;
  const created = await t.request('GET', `/api/queue/v1/task/${taskId}`);
  assert.equal((created.body as { payload: { command: string } }).payload.command, 'echo ${FIRED_BY}');
});
