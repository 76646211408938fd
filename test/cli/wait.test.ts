import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../src/temporal/devServer.js';
import { useStack } from '../helpers/stackFixture.js';
import { runTgs, useShellWorker } from '../helpers/cli.js';

// `--wait` as a new user meets it: it waits for the whole graph, says why tasks wait, and outlives an API restart.
const stack = useStack();
const shell = useShellWorker(stack, 'wait');

const env = (rootUrl = stack.api.rootUrl) => ({ TGS_ROOT_URL: rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken });
const tgs = (args: string[], options: Parameters<typeof runTgs>[2] = {}) => runTgs(args, env(), options);
const task = (command: string, extra: Record<string, unknown> = {}) => ({ provisionerId: 'tgs-test', workerType: 'wait', payload: { command, maxRunTime: 60, ...extra } });

function graphFile(name: string, graph: unknown): string {
  const file = path.join(shell.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(graph));
  return file;
}

/** A graph whose `fails` fails at once while the independent `slow` (and `after` it) wait for the gate file. */
function diamond(name: string, gate: string): string {
  return graphFile(name, {
    tasks: {
      fails: { task: task('echo failing on purpose; exit 3') },
      blocked: { requires: ['fails'], task: task('echo never') },
      slow: { task: task(`while [ ! -f ${gate} ]; do sleep 0.1; done; echo slow done`) },
      after: { requires: ['slow'], task: task('echo after slow') },
    },
  });
}

test('--wait waits until nothing can run, then lists every failure with times since creation; --fail-fast stops at the first', async () => {
  const gate = path.join(shell.dir, 'all-gate');
  let releasedAt = 0;
  // the gate opens once the failure is shown in the progress lines: --wait must go on until slow and after completed
  const run = await tgs(['graph', 'submit', diamond('all', gate), '--wait'], {
    onStdout: (soFar) => {
      if (!releasedAt && /blocked · 4 tasks: 0 completed, 1 running, 2 unscheduled, 1 failed/.test(soFar)) {
        releasedAt = Date.now();
        writeFileSync(gate, '');
      }
    },
  });
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.ok(releasedAt, run.stdout);
  assert.match(run.stdout, /is blocked \(4 tasks: 2 completed, 1 unscheduled, 1 failed\); nothing else can run/);
  assert.match(run.stdout, /1 failed task\(s\), times since the graph was created:\n {2}fails {2}\S{22} {2}run 0 failed {2}\+\d+\.\ds/);
  assert.match(run.stdout, /blocking task: fails \(\S{22}\), run 0 failed, exit code 3/);
  const id = /task-graph (\S+) submitted/.exec(run.stdout)?.[1] as string;
  assert.match(run.stdout, new RegExp(`Full log: tgs task log ${id} fails\nRerun it: tgs graph rerun ${id} fails`));

  const failFastGate = path.join(shell.dir, 'fast-gate');
  const fast = await tgs(['graph', 'submit', diamond('fast', failFastGate), '--wait', '--fail-fast']);
  writeFileSync(failFastGate, '');
  assert.equal(fast.code, 1, fast.stdout + fast.stderr);
  assert.match(fast.stdout, /is blocked \(4 tasks: 0 completed, 1 running, 2 unscheduled, 1 failed\); 1 task\(s\) still running or pending \(--fail-fast stops at the first failure\)/);
});

test('--wait prints graph why once when tasks wait and no worker claims them', async () => {
  const file = graphFile('nobody', { tasks: { lonely: { task: { ...task('echo hi'), workerType: 'shel' } } } });
  const run = await tgs(['graph', 'submit', file, '--wait', '--why-after', '2'], { stopWhen: (soFar) => /→/.test(soFar) });
  assert.match(run.stdout, /nothing has started for \d+\.\ds; tgs graph why \S+ says:/);
  assert.match(run.stdout, /no-workers tgs-test\/shel/);
});

test('a malformed payload fails with no rerun hint: the definition must change', async () => {
  const file = graphFile('malformed', { tasks: { bad: { task: { provisionerId: 'tgs-test', workerType: 'wait', payload: { cmd: 'echo hi' } } } } });
  const run = await tgs(['graph', 'submit', file, '--wait']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stdout, /bad {2}\S{22} {2}run 0 exception \(malformed-payload\)/);
  assert.match(run.stdout, /Its payload is malformed \(the log says why\): fix the task in the graph file, check it with tgs graph submit --check <file>, and submit again/);
  assert.doesNotMatch(run.stdout, /Rerun it/);
});

test('--wait outlives an API restart: one line while it cannot reach the API, one when it answers again', async () => {
  // the CLI talks to the API through a port this test closes and opens again, as a restarting `tgs dev` does
  const port = await freePort();
  const target = new URL(stack.api.rootUrl);
  const sockets = new Set<net.Socket>();
  const open = () =>
    net
      .createServer((inbound) => {
        const outbound = net.connect(Number(target.port), target.hostname);
        sockets.add(inbound).add(outbound);
        inbound.pipe(outbound).pipe(inbound);
        inbound.on('error', () => outbound.destroy());
        outbound.on('error', () => inbound.destroy());
      })
      .listen(port, '127.0.0.1');
  let proxy = open();
  const gate = path.join(shell.dir, 'restart-gate');
  const file = graphFile('restart', { tasks: { waits: { task: task(`while [ ! -f ${gate} ]; do sleep 0.1; done; echo done`) } } });
  let down = false;
  const run = runTgs(['graph', 'submit', file, '--wait'], env(`http://127.0.0.1:${port}`), {
    onStdout: (soFar) => {
      if (down || !/running: waits/.test(soFar)) return;
      down = true;
      proxy.close();
      for (const s of sockets) s.destroy();
      setTimeout(() => {
        proxy = open();
        writeFileSync(gate, '');
      }, 4000);
    },
  });
  const result = await run;
  proxy.close();
  assert.equal(result.code, 0, result.stdout + result.stderr);
  assert.equal(result.stderr.match(/cannot reach/g)?.length, 1, result.stderr);
  assert.match(result.stderr, /tgs: cannot reach http:\/\/127\.0\.0\.1:\d+ .*\ntgs: --wait tries again for up to 2m00s \(a restarting API; Ctrl-C stops\)/);
  assert.match(result.stderr, /answers again after \d+\.\ds/);
  assert.match(result.stdout, /finished: 1 of 1 tasks completed in \d+\.\ds \(since it was created\)/);
});
