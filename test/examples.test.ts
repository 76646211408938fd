import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { startShellWorker, type ShellWorker } from '../src/shellWorker/index.js';
import { TgsClient } from '../src/client/tgsClient.js';
import { useStack } from './helpers/stackFixture.js';
import { eventually } from '../support/stack.js';

const repo = fileURLToPath(new URL('..', import.meta.url));

const stack = useStack();
let client: TgsClient;
const workers: ShellWorker[] = [];

stack.onStart(async () => {
  client = new TgsClient({ rootUrl: stack.api.rootUrl, credentials: stack.api.root });
  // what `tgs dev --workers 2` runs: shell workers for tgs-dev/shell
  for (const n of [1, 2]) {
    workers.push(
      startShellWorker({
        rootUrl: stack.api.rootUrl,
        credentials: stack.api.root,
        provisionerId: 'tgs-dev',
        workerType: 'shell',
        capacity: 2,
        workerId: `example-${n}`,
        log: () => undefined,
      }),
    );
  }
});
stack.onStop(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

/** `tgs graph submit examples/<name>/graph.yaml --wait`, as examples/README.md says; returns the graph's labels → taskIds. */
async function submitExample(name: string): Promise<{ taskGraphId: string; ids: Map<string, string>; stdout: string }> {
  const result = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', 'graph', 'submit', `examples/${name}/graph.yaml`, '--wait'],
      {
        cwd: repo,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken },
        timeout: 180_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
  assert.equal(result.code, 0, `${name}:\n${result.stdout}\n${result.stderr}`);
  const taskGraphId = /task-graph (\S+) submitted/.exec(result.stdout)?.[1] as string;
  assert.match(result.stdout, new RegExp(`task-graph ${taskGraphId} finished`));
  const tasks = await client.inspect(taskGraphId);
  assert.ok(tasks.every((t) => t.state === 'completed'), JSON.stringify(tasks));
  return { taskGraphId, ids: new Map(tasks.map((t) => [t.label, t.taskId])), stdout: result.stdout };
}

const text = async (taskId: string, name: string) => (await client.artifact(taskId, name)).data.toString('utf8');

test('every example directory is covered here and documented in examples/README.md', async () => {
  const dirs = readdirSync(new URL('../examples', import.meta.url), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name).sort();
  assert.deepEqual(dirs, ['build-test-package', 'fan-out-fan-in', 'flaky-reruns']);
  const readme = await import('node:fs').then((fs) => fs.readFileSync(new URL('../examples/README.md', import.meta.url), 'utf8'));
  for (const d of dirs) assert.match(readme, new RegExp(`tgs graph submit examples/${d}/graph.yaml --wait`));
  assert.match(readme, /tgs dev --workers 2/);
});

test('build-test-package: artifacts flow through $subs; the release holds the build and the test report with checksums', async () => {
  const { ids } = await submitExample('build-test-package');
  assert.match(await text(ids.get('test') as string, 'public/test/report.txt'), new RegExp(`^PASS greet \\(build ${ids.get('build')}\\)\\n$`));
  const sums = await text(ids.get('package') as string, 'public/release/SHA256SUMS');
  assert.match(sums, /^[0-9a-f]{64} {2}app\.tar\.gz\n[0-9a-f]{64} {2}test-report\.txt\n$/);
  const release = await client.artifact(ids.get('package') as string, 'public/release/greet-1.0.0.tar.gz');
  assert.equal(release.contentType, 'application/gzip');
  const tar = gunzipSync(release.data).toString('latin1');
  assert.match(tar, /release\/app\.tar\.gz/);
  assert.match(tar, /release\/test-report\.txt/);
  assert.match(tar, /release\/SHA256SUMS/);
});

test('build-test-package amended: a comment in build\'s command reruns build alone; its identical bytes keep test and package', async () => {
  const { taskGraphId, ids } = await submitExample('build-test-package');
  const sums = await text(ids.get('package') as string, 'public/release/SHA256SUMS');
  const original = readFileSync(path.join(repo, 'examples/build-test-package/graph.yaml'), 'utf8');
  const edited = original.replace('mkdir -p app\n', "mkdir -p app  # the app's sources\n");
  assert.notEqual(edited, original);
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-amend-'));
  try {
    writeFileSync(path.join(dir, 'graph.yaml'), edited);
    const dry = await tgs(['graph', 'amend', taskGraphId, path.join(dir, 'graph.yaml'), '--dry-run']);
    assert.equal(dry.code, 0, dry.stdout + dry.stderr);
    assert.match(dry.stdout, /changed: build\n/);
    assert.match(dry.stdout, /byte-identical \(early cutoff\): package, test\n/);
    const amended = await tgs(['graph', 'amend', taskGraphId, path.join(dir, 'graph.yaml')]);
    assert.equal(amended.code, 0, amended.stdout + amended.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  await eventually(async () => (await client.graphStatus(taskGraphId)).state === 'finished', 'finished again', 120_000);
  const after = new Map((await client.inspect(taskGraphId)).map((t) => [t.label, t]));
  const build = await client.taskStatus(after.get('build')?.taskId as string);
  assert.notEqual(build.taskId, ids.get('build'));
  assert.equal(build.runs[0].workerGroup, 'tgs-shell', 'build ran on a shell worker');
  for (const [label, kept] of [['test', "kept: build's outputs unchanged"], ['package', 'kept: the outputs of build and test unchanged']] as const) {
    const t = after.get(label);
    assert.equal(t?.cutoff, kept, label);
    const run = (await client.taskStatus(t?.taskId as string)).runs[0];
    assert.equal(run.workerGroup, 'tgs-cutoff', `${label} was not run`);
    assert.deepEqual(run.keptFrom, { taskId: ids.get(label), runId: 0 });
  }
  assert.equal(await text(after.get('package')?.taskId as string, 'public/release/SHA256SUMS'), sums, 'the kept package serves the release it made');
  const why = await tgs(['graph', 'why', taskGraphId]);
  assert.match(why.stdout, /Amend #1 by /);
  assert.match(why.stdout, /test +dependent +kept: build's outputs unchanged/);
});

test('fan-out-fan-in: four counts run from one split, combine totals them to 80200', async () => {
  const { ids } = await submitExample('fan-out-fan-in');
  const sums = await Promise.all([1, 2, 3, 4].map((n) => text(ids.get(`count-${n}`) as string, 'public/sum.txt')));
  assert.deepEqual(sums, ['5050\n', '15050\n', '25050\n', '35050\n']);
  assert.equal(await text(ids.get('combine') as string, 'public/total.txt'), '80200\n');
  const log = await text(ids.get('combine') as string, 'public/logs/live.log');
  assert.match(log, /^total 80200$/m);
});

test('flaky-reruns: the flaky task fails its first run and passes on the rerun; the graph finishes', async () => {
  const { ids } = await submitExample('flaky-reruns');
  const flaky = await client.taskStatus(ids.get('flaky-test') as string);
  assert.deepEqual(flaky.runs.map((r) => r.state), ['failed', 'completed']);
  const firstLog = (await client.artifact(flaky.taskId, 'public/logs/live.log', { runId: 0 })).data.toString();
  assert.match(firstLog, /simulated intermittent failure/);
  const report = await text(ids.get('report') as string, 'public/logs/live.log');
  assert.match(report, /flaky-test run 0: failed\nflaky-test run 1: completed/);
  const inspected = await client.inspect((await client.task(flaky.taskId)).taskGroupId as string, 'flaky-test');
  assert.equal(inspected.rerunsLeft, 1);
});

/** `tgs <args>` from source, as the stack's root (the README's and the docs' `npx tgs …` with credentials exported). */
function tgs(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', ...args],
      {
        cwd: repo,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken },
        timeout: 180_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The `sh`/`yaml` blocks of a markdown file between two headings. */
function blocks(file: string, from: string, to: string, lang: string): string[] {
  const text = readFileSync(new URL(`../${file}`, import.meta.url), 'utf8');
  const section = text.slice(text.indexOf(from), text.indexOf(to, text.indexOf(from)));
  return [...section.matchAll(new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm'))].map((m) => m[2].replace(new RegExp(`^${m[1]}`, 'gm'), ''));
}

test("docs/formats.md's first graph runs on tgs dev's pool exactly as written", async () => {
  const [first] = blocks('docs/formats.md', '## Task-graph format', '## Graph operations', 'yaml');
  assert.match(first, /provisionerId: tgs-dev/);
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-formats-'));
  try {
    writeFileSync(path.join(dir, 'hello.yaml'), first);
    const checked = await tgs(['graph', 'submit', '--check', path.join(dir, 'hello.yaml')]);
    assert.equal(checked.code, 0, checked.stdout + checked.stderr);
    assert.equal(checked.stderr, '', 'no warnings');
    const run = await tgs(['graph', 'submit', path.join(dir, 'hello.yaml'), '--wait']);
    assert.equal(run.code, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /finished: 2 of 2 tasks completed/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("README's tour runs as written: every `npx tgs` line of its steps, placeholders filled in", async () => {
  const lines = blocks('README.md', '## A five-minute tour', '## What runs', 'sh')
    .flatMap((b) => b.split('\n'))
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l.startsWith('npx tgs ') && l !== 'npx tgs dev --workers 2');
  assert.ok(lines.length >= 5, lines.join('\n'));
  let taskGraphId = '';
  let taskId = '';
  for (const line of lines) {
    const args = line
      .slice('npx tgs '.length)
      .replaceAll('<taskGraphId>', taskGraphId)
      .replaceAll('<taskId>', taskId)
      .replaceAll('<label>', 'build')
      .split(/\s+/);
    const run = await tgs(args);
    assert.equal(run.code, 0, `${line}\n${run.stdout}\n${run.stderr}`);
    if (!taskGraphId) {
      taskGraphId = /task-graph (\S+) submitted/.exec(run.stdout)?.[1] as string;
      assert.ok(taskGraphId, run.stdout);
      taskId = (await client.inspect(taskGraphId, 'build')).taskId;
    }
  }
});
