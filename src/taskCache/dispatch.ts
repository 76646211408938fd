import type pg from 'pg';
import type { Config } from '../config.js';
import { resolveFromEarlierRuns } from '../queue/resolveFromEarlierRuns.js';
import { resolveTaskGroupsIfDone } from '../queue/taskGroups.js';
import { lookUpCache } from './lookup.js';
import { cacheRows, recordLookups, type CachedFrom } from './store.js';

/**
 * The cache's part of scheduling ready tasks, in the dispatch's transaction (src/activities/index.ts): each ready
 * task whose node is cached with mode `use` and was never looked up is looked up; a hit resolves it completed from
 * the cache instead of scheduling it, and what every lookup found is recorded, all in the same transaction. So a
 * scheduler worker killed between the lookup and the resolution leaves nothing: the retried dispatch looks up
 * again, and the task gets exactly one run and one message. Returns the taskIds resolved from the cache (the rest
 * are scheduled as usual). A graph without cached nodes costs one indexed read of an empty result.
 */
export async function resolveReadyFromCache(client: pg.PoolClient, config: Config, taskGroupId: string, ready: string[], now: Date): Promise<Set<string>> {
  const rows = (await cacheRows(client, ready)).filter((r) => r.mode === 'use' && r.lookedUp === undefined);
  if (rows.length === 0) return new Set();
  // the tasks locked in taskId order first, as every bulk change locks them, so the cache's update and the
  // schedule's that follows cannot deadlock with a cancel taking the same tasks
  await client.query('SELECT 1 FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id FOR UPDATE', [ready]);
  const lookups: { taskId: string; lookup: Awaited<ReturnType<typeof lookUpCache>>['lookup']; cachedFrom?: CachedFrom }[] = [];
  for (const row of rows) {
    const outcome = await lookUpCache(client, config.cacheTiers, row, now);
    lookups.push({ taskId: row.taskId, lookup: outcome.lookup, ...(outcome.hit ? { cachedFrom: outcome.hit } : {}) });
  }
  const hits = lookups.flatMap((l) => (l.cachedFrom ? [{ taskId: l.taskId, cachedFrom: l.cachedFrom }] : []));
  const resolved = await resolveFromEarlierRuns(client, config, hits, now);
  const resolvedIds = new Set(resolved.map((r) => r.task_id));
  // a hit the queue did not take (a cancel or the deadline came first) is recorded as the lookup found it, without its source
  await recordLookups(client, lookups.map((l) => (l.cachedFrom && !resolvedIds.has(l.taskId) ? { taskId: l.taskId, lookup: l.lookup } : l)));
  if (resolvedIds.size > 0) await resolveTaskGroupsIfDone(client, config, [taskGroupId]);
  return resolvedIds;
}
