import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { ApiClient, TgsApiError } from '../../src/client/http.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { startApiProcess, type ApiProcess } from '../helpers/apiProcess.js';

// A rolling deploy SIGTERMs the API under load: every request must get a whole HTTP answer (or be refused
// before it reached the API), never a connection closed under it.
let db: TestDatabase;
let api: ApiProcess;

before(async () => {
  db = await createTestDatabase();
  api = await startApiProcess(db.url);
});

after(async () => {
  if (api.child.exitCode === null && api.child.signalCode === null) api.child.kill('SIGKILL');
  await db.drop();
});

const taskDefinition = (workerType: string) => ({
  provisionerId: 'tgs-test',
  workerType,
  created: new Date().toISOString(),
  deadline: new Date(Date.now() + 3600_000).toISOString(),
  payload: {},
  metadata: { name: 'graceful stop', description: 'a task claimed around a SIGTERM', owner: 'tests@example.com', source: 'https://example.com/tgs' },
});

/** undefined: answered (any status); 'refused': no connection; 'cut': the connection closed without an answer */
function outcome(err: unknown): 'refused' | 'cut' | undefined {
  if (!(err instanceof TgsApiError)) return 'cut';
  if (err.status !== 0) return undefined;
  // `connect ECONNRESET`: reset before the connection was up, so nothing was sent
  return /ECONNREFUSED|connect ECONNRESET/.test(err.message) ? 'refused' : 'cut';
}

interface Claimed {
  status: { taskId: string };
  runId: number;
  credentials: { clientId: string; accessToken: string; certificate?: string };
}

test('SIGTERM: long-polls answered empty, claims returned, a racing report answered, no request cut, exit 0', { timeout: 120_000 }, async () => {
  const client = new ApiClient(api.rootUrl, api.root);
  for (let i = 0; i < 120; i++) await client.request('queue', 'PUT', `/task/${slugid.nice()}`, taskDefinition('busy'));
  await client.request('queue', 'PUT', `/task/${slugid.nice()}`, taskDefinition('report'));
  const toReport = (await client.request<{ tasks: Claimed[] }>('queue', 'POST', '/claim-work/tgs-test/report', { workerGroup: 'g', workerId: 'reporter', tasks: 1 })).tasks[0];
  assert.ok(toReport, 'the task to report was claimed');

  const cuts: string[] = [];
  const returned = new Set<string>();
  // long-polls on an empty queue: in flight when the signal comes
  const longPolls = Array.from({ length: 6 }, (_, i) =>
    client.request<{ tasks: Claimed[] }>('queue', 'POST', '/claim-work/tgs-test/empty', { workerGroup: 'g', workerId: `idle-${i}`, tasks: 2 }).then(
      (r) => r.tasks.length,
      (err: unknown) => {
        if (outcome(err) === 'cut') cuts.push(`long-poll ${i}: ${(err as Error).message}`);
        return -1;
      },
    ),
  );
  // busy workers claiming one task after the other on keep-alive connections, until the API refuses them
  let stopLoops = false;
  const loops = Array.from({ length: 4 }, async (_, i) => {
    let answered = 0;
    while (!stopLoops) {
      try {
        const r = await client.request<{ tasks: Claimed[] }>('queue', 'POST', '/claim-work/tgs-test/busy', { workerGroup: 'g', workerId: `busy-${i}`, tasks: 1 });
        for (const t of r.tasks) returned.add(t.status.taskId);
        answered++;
      } catch (err) {
        const kind = outcome(err);
        if (kind === 'cut') cuts.push(`busy worker ${i}: ${(err as Error).message}`);
        // refused, or told 503 (the API is stopping): a worker goes to another API
        if (kind || (err as TgsApiError).status === 503) break;
      }
    }
    return answered;
  });
  await new Promise((r) => setTimeout(r, 500));
  const signalled = Date.now();
  api.child.kill('SIGTERM');
  const reporter = new ApiClient(api.rootUrl, toReport.credentials);
  // on a new connection after the signal: served if it came before the stop began, else refused with a 503
  // that says nothing was done; never cut
  const report = reporter.request('queue', 'POST', `/task/${toReport.status.taskId}/runs/${toReport.runId}/completed`).then(
    () => 'ok',
    (err: unknown) => {
      if (err instanceof TgsApiError && err.status === 503 && err.code === 'ServiceUnavailable') return 'refused: 503';
      return outcome(err) === 'cut' ? `cut: ${(err as Error).message}` : `${(err as Error).message}`;
    },
  );
  const code = await api.exited;
  const stoppedAfter = Date.now() - signalled;
  stopLoops = true;
  const answeredByLoop = await Promise.all(loops);
  const longPollAnswers = await Promise.all(longPolls);

  assert.deepEqual(cuts, [], `requests cut without an answer:\n${cuts.join('\n')}\n${api.output()}`);
  assert.equal(code, 0, api.output());
  assert.ok(stoppedAfter < 15_000, `exited ${stoppedAfter} ms after SIGTERM`);
  assert.deepEqual(longPollAnswers, [0, 0, 0, 0, 0, 0], 'every long-poll answered with no task');
  assert.ok(answeredByLoop.every((n) => n > 0), `claims answered per busy worker: ${answeredByLoop}`);
  const reported = await report;
  assert.ok(reported === 'ok' || reported === 'refused: 503', `the racing report: ${reported}`);
  const { rows } = await db.pool.query<{ task_id: string; state: string }>(`SELECT task_id, state FROM tasks WHERE worker_type IN ('busy', 'report')`);
  const running = rows.filter((r) => r.state === 'running').map((r) => r.task_id);
  // every claim the API made reached its worker: nothing is left running that no answer handed out
  assert.deepEqual(running.filter((id) => !returned.has(id) && id !== toReport.status.taskId), []);
  // answered ok: it counted; refused: nothing was done, the run is still the worker's to report elsewhere
  assert.equal(rows.find((r) => r.task_id === toReport.status.taskId)?.state, reported === 'ok' ? 'completed' : 'running');
});
