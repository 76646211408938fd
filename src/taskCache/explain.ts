import type { Queryable } from '../db/pool.js';
import { differingInputs, differingPaths, type CacheKeyInputs } from './key.js';
import { lookUpCache } from './lookup.js';
import type { CacheRow, TierLookup } from './store.js';
import { cachePath } from './tiers.js';

/** `why` for one cached node (docs/formats.md § Cached tasks): what its key is made of and what each tier holds. */
export interface CacheExplanation extends Pick<CacheRow, 'taskId' | 'taskGraphId' | 'label' | 'name' | 'tier' | 'key' | 'mode' | 'neededUntil' | 'inputs'> {
  /** the index path the node's completion writes (none with mode `off`) */
  path?: string;
  maxAge?: number;
  /** what the lookup found when the task became ready, and whether it was reused */
  lookedUp?: string;
  lookup?: TierLookup[];
  cachedFrom?: CacheRow['cachedFrom'];
  /** what a lookup would find now */
  now: TierLookup[];
  /** given another cached task: which inputs differ, and where in the payload */
  comparedTo?: { taskId: string; key: string; sameKey: boolean; differing: (keyof CacheKeyInputs)[]; payloadPaths: string[] };
  summary: string;
}

function summarize(row: CacheRow): string {
  if (row.mode === 'off') return 'caching is off for this task: it is neither looked up nor written';
  if (row.mode === 'refresh') return 'mode refresh: the task runs and its completion overwrites the entry';
  if (row.cachedFrom) return `reused task ${row.cachedFrom.taskId} run ${row.cachedFrom.runId} from tier ${row.cachedFrom.tier}: no worker ran it`;
  if (!row.lookup) return 'not looked up yet: the lookup happens when the task becomes ready';
  const why = row.lookup.map((l) => `${l.tier}: ${l.result}${l.taskId ? ` (${l.taskId})` : ''}`).join(', ');
  return `ran: no tier held a usable entry (${why}); its completion writes ${cachePath(row.tier, row.name, row.key)}`;
}

export async function explainCache(db: Queryable, tiers: readonly string[], row: CacheRow, other: CacheRow | undefined, now: Date): Promise<CacheExplanation> {
  const current = await lookUpCache(db, tiers, row, now);
  return {
    taskId: row.taskId,
    taskGraphId: row.taskGraphId,
    label: row.label,
    name: row.name,
    tier: row.tier,
    key: row.key,
    ...(row.mode !== 'off' ? { path: cachePath(row.tier, row.name, row.key) } : {}),
    mode: row.mode,
    ...(row.maxAgeS !== undefined ? { maxAge: row.maxAgeS } : {}),
    neededUntil: row.neededUntil,
    inputs: row.inputs,
    ...(row.lookedUp ? { lookedUp: row.lookedUp, lookup: row.lookup } : {}),
    ...(row.cachedFrom ? { cachedFrom: row.cachedFrom } : {}),
    now: current.lookup,
    ...(other
      ? {
          comparedTo: {
            taskId: other.taskId,
            key: other.key,
            sameKey: other.key === row.key,
            differing: differingInputs(row.inputs, other.inputs),
            payloadPaths: differingPaths(row.inputs.payload, other.inputs.payload),
          },
        }
      : {}),
    summary: summarize(row),
  };
}
