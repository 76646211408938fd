import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

let t: TestApi;
before(async () => {
  // a short long-poll: a claimer that finds nothing stops soon after the queue is empty
  t = await startTestApi({ claimWorkWaitMs: 300 });
});
after(async () => {
  await t.close();
});

const PRIORITIES = ['highest', 'very-high', 'high', 'medium', 'low', 'very-low', 'lowest', 'normal'];
const rank = (p: string) => (p === 'normal' ? 1 : 7 - PRIORITIES.indexOf(p));

const q = (method: string, path: string, body?: unknown, creds?: Parameters<TestApi['request']>[3]) => t.request(method, `/api/queue/v1${path}`, body, creds);

async function create(workerType: string, priority: string): Promise<string> {
  const taskId = slugid.nice();
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask(taskId), workerType, priority });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}

interface Claimed {
  status: { taskId: string };
  runId: number;
  credentials: Parameters<TestApi['request']>[3];
}

async function claimWork(workerType: string, workerId: string, tasks: number): Promise<Claimed[]> {
  const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'claimers', workerId, tasks });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.tasks as Claimed[];
}

test('16 concurrent claimers over HTTP: 500 tasks of mixed priorities, each claimed exactly once', async () => {
  const workerType = 'claimers16';
  const priorityOf = new Map<string, string>();
  for (let i = 0; i < 500; i += 25) {
    const batch = await Promise.all(
      Array.from({ length: 25 }, async (_, k) => {
        const priority = PRIORITIES[(i + k) % PRIORITIES.length];
        return [await create(workerType, priority), priority] as const;
      }),
    );
    for (const [id, p] of batch) priorityOf.set(id, p);
  }

  const claimsByWorker: string[][] = [];
  const claimer = async (n: number) => {
    const mine: string[] = (claimsByWorker[n] = []);
    for (;;) {
      const claimed = await claimWork(workerType, `w${n}`, 1 + (n % 3));
      if (claimed.length === 0) return;
      for (const c of claimed) {
        mine.push(c.status.taskId);
        const done = await q('POST', `/task/${c.status.taskId}/runs/${c.runId}/completed`, undefined, c.credentials);
        assert.equal(done.status, 200, JSON.stringify(done.body));
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, (_, n) => claimer(n)));

  const all = claimsByWorker.flat();
  const counts = new Map<string, number>();
  for (const id of all) counts.set(id, (counts.get(id) ?? 0) + 1);
  assert.deepEqual([...counts].filter(([, n]) => n > 1), [], 'no task claimed twice');
  assert.equal(counts.size, 500, 'every task claimed');
  assert.ok(claimsByWorker.filter((c) => c.length > 0).length > 1, 'the work was shared between claimers');

  // Each claim takes the best task nobody else holds, and no task is added meanwhile: so every claimer
  // sees priorities that never go up.
  for (const [n, ids] of claimsByWorker.entries()) {
    const ranks = ids.map((id) => rank(priorityOf.get(id) as string));
    const rise = ranks.findIndex((r, i) => i > 0 && r > ranks[i - 1]);
    assert.equal(rise, -1, `claimer w${n} saw priority go up at claim ${rise}: ${ranks.join(',')}`);
  }

  const { rows } = await t.db.pool.query<{ state: string; runs: number; n: number }>(
    `SELECT state, jsonb_array_length(runs) AS runs, count(*)::int AS n FROM tasks WHERE worker_type = $1 GROUP BY 1, 2`,
    [workerType],
  );
  assert.deepEqual(rows, [{ state: 'completed', runs: 1, n: 500 }], 'all completed, in one run each');
});

test('a single claimer sees the highest priority first and FIFO within a priority', async () => {
  const workerType = 'claimers-order';
  const created: { id: string; priority: string; seq: number }[] = [];
  // created one after another, so creation order is the FIFO order; priorities interleaved
  for (let i = 0; i < 48; i++) {
    const priority = PRIORITIES[(i * 5) % PRIORITIES.length];
    created.push({ id: await create(workerType, priority), priority, seq: i });
  }
  const expected = [...created].sort((x, y) => rank(y.priority) - rank(x.priority) || x.seq - y.seq).map((x) => x.id);
  const seen: string[] = [];
  for (;;) {
    const claimed = await claimWork(workerType, 'solo', 1 + (seen.length % 4));
    if (claimed.length === 0) break;
    seen.push(...claimed.map((c) => c.status.taskId));
  }
  assert.deepEqual(seen, expected);
});
