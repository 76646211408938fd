import type { Queryable } from '../db/pool.js';
import { findTask } from '../indexService/store.js';
import { artifactExpiresBefore } from '../queue/artifacts.js';
import type { CacheRow, CachedFrom, TierLookup } from './store.js';
import { cachePath, tiersToSearch } from './tiers.js';

/** What the lookup of one cached node found: a result per tier searched, and the hit it takes, if any. */
export interface LookupOutcome {
  lookup: TierLookup[];
  hit?: CachedFrom;
}

interface SourceRow {
  task_id: string;
  expires: Date;
  runs: { runId: number; state: string; resolved?: string; cachedFrom?: CachedFrom }[];
}

/** The run an entry's task stands for: its latest, or, if that was itself a hit, the run the hit came from. */
async function sourceRun(db: Queryable, taskId: string): Promise<{ row: SourceRow; run: SourceRow['runs'][number] } | undefined> {
  const read = async (id: string) =>
    (await db.query<SourceRow>('SELECT task_id, expires, runs FROM tasks WHERE task_id = $1', [id])).rows[0] as SourceRow | undefined;
  let row = await read(taskId);
  let run = row?.runs[row.runs.length - 1];
  // an entry a caller inserted by hand may name a hit; follow it once (a hit never writes an entry itself)
  if (row && run?.cachedFrom) {
    const from = run.cachedFrom;
    row = await read(from.taskId);
    run = row?.runs[from.runId];
  }
  return row && run ? { row, run } : undefined;
}

/**
 * Looks a cached node up in its own tier and every tier above it (highest first; src/taskCache/tiers.ts). An entry
 * is a hit only if its task's run completed (never failed or exception), the task expires no earlier than
 * `needed_until` (the node's and its dependents' deadlines: its artifacts must outlive every reader in the graph),
 * so does every artifact of the run (else `artifact-expires`), and the run resolved less than `maxAge` ago. Every tier is examined, so `why` can say what each held; the
 * highest hit is taken.
 */
export async function lookUpCache(db: Queryable, tiers: readonly string[], row: CacheRow, now: Date): Promise<LookupOutcome> {
  const lookup: TierLookup[] = [];
  let hit: CachedFrom | undefined;
  for (const tier of tiersToSearch(tiers, row.tier)) {
    const entry = await findTask(db, cachePath(tier, row.name, row.key));
    if (!entry) {
      lookup.push({ tier, result: 'miss' });
      continue;
    }
    const source = await sourceRun(db, entry.taskId);
    const taskId = entry.taskId;
    if (!source || source.run.state !== 'completed') lookup.push({ tier, result: 'source-failed', taskId });
    else if (source.row.expires.getTime() < Date.parse(row.neededUntil)) lookup.push({ tier, result: 'expires-before-deadline', taskId });
    else if (await artifactExpiresBefore(db, source.row.task_id, source.run.runId, row.neededUntil)) lookup.push({ tier, result: 'artifact-expires', taskId });
    else if (row.maxAgeS !== undefined && now.getTime() - Date.parse(source.run.resolved ?? '') > row.maxAgeS * 1000) lookup.push({ tier, result: 'expired', taskId });
    else {
      lookup.push({ tier, result: 'hit', taskId });
      hit ??= { taskId: source.row.task_id, runId: source.run.runId, key: row.key, tier };
    }
  }
  return { lookup, ...(hit ? { hit } : {}) };
}
