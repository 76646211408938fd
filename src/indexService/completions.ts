import { queueExchangeName } from '../exchanges/exchanges.js';
import { MAX_NAMESPACE_LENGTH } from './namespace.js';
import { NAMESPACE_SQL_PATTERN, upsertStatement } from './store.js';

/**
 * Indexing on completion (Taskcluster's rule, docs/formats.md § The index): a task whose `routes` include
 * `index.<path>` is indexed at every such path when it completes, with `task.extra.index.rank` (a number, default
 * 0), `.data` (an object, default {}) and `.expires` (a date-time, default the task's `expires`). A task whose
 * `extra.index` has a rank, data or expires of another kind is not indexed (Taskcluster skips it the same way); a
 * route whose path is not a valid index path is skipped.
 *
 * Where: the relay (src/relay/relay.ts) deletes a batch's outbox rows only after RabbitMQ confirmed them; the
 * completions of the batch are indexed by the same statement as that delete. So no completion's row is gone
 * before its entries exist, and a batch published again after a crash upserts the same entries again (the upsert
 * is idempotent). A consumer of the exchange would miss the completions published before its queue was first
 * declared.
 */

/** The CC prefix a task's `index.` route has on its messages (`route.<route>`, docs/formats.md § exchanges). */
const INDEX_CC = 'route.index.';

/**
 * The taskId of a `task-completed` message of a task with an `index.` route, else undefined. Called for every
 * message the relay publishes: a message without CC (a task without routes) is answered by its first comparison.
 * Measured here (2 shared cores): 0.7 ns a message warmed up, 6.5 µs for a first batch of 500 (13 ns a message), 17 µs
 * for 500 messages with two other routes each; the relay spends ~230 µs of CPU a task.
 */
export function completionToIndex(completedExchange: string, message: { exchange: string; cc: string[]; payload: unknown }): string | undefined {
  if (message.cc.length === 0 || message.exchange !== completedExchange) return undefined;
  for (const cc of message.cc) {
    if (cc.startsWith(INDEX_CC)) return (message.payload as { status: { taskId: string } }).status.taskId;
  }
  return undefined;
}

/** The exchange whose messages are indexed, with the deployment's prefix. */
export const completedExchange = (exchangePrefix: string) => queueExchangeName(exchangePrefix, 'task-completed');

/**
 * The entries of the completed tasks `$<param>` (taskIds, in message order: of two entries of equal rank at one path
 * the later completion wins), read from the tasks' stored definitions. Every value that could fail a cast is
 * checked first (tgs_index_expires, migration 022): the statement runs in the relay's delete, so one task's odd
 * `extra` must never fail a batch.
 */
export const completionEntries = (param: string) => `
  SELECT CASE WHEN strpos(e.path, '.') > 0 THEN regexp_replace(e.path, '\\.[^.]*$', '') ELSE '' END AS namespace,
         substring(e.path from '[^.]*$') AS name,
         -- a cache entry's rank is fixed: extra.index.rank is not part of the key, so a rank there would pin a
         -- poisoned entry against the key's later completions and refresh (security review 2026-11-28, #7)
         CASE WHEN e.path LIKE 'tgs.cache.%' THEN 0 ELSE COALESCE((x.index->>'rank')::float8, 0) END AS rank, t.task_id,
         COALESCE(x.index->'data', '{}'::jsonb) AS data,
         COALESCE(tgs_index_expires(x.index->'expires'), t.expires) AS expires, c.ord
    FROM unnest(${param}::text[]) WITH ORDINALITY AS c(task_id, ord)
    JOIN tasks t ON t.task_id = c.task_id
    CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(t.definition->'extra'->'index') = 'object'
                                    THEN t.definition->'extra'->'index' ELSE '{}'::jsonb END AS index) x
    CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(t.definition->'routes') = 'array'
                                                      THEN t.definition->'routes' ELSE '[]'::jsonb END) AS r(route)
    CROSS JOIN LATERAL (SELECT substr(r.route, 7) AS path) e
   WHERE r.route LIKE 'index.%' AND length(e.path) <= ${MAX_NAMESPACE_LENGTH} AND e.path ~ ${NAMESPACE_SQL_PATTERN}
     -- a run resolved from the cache does not write the cache's entry: it points at its source already, and
     -- pointing the entry at the hit would outlive the source's artifacts (docs/formats.md § Cached tasks)
     AND NOT (e.path LIKE 'tgs.cache.%' AND t.runs -> -1 ? 'cachedFrom')
     AND (x.index->'rank' IS NULL OR jsonb_typeof(x.index->'rank') = 'number')
     AND (x.index->'data' IS NULL OR jsonb_typeof(x.index->'data') = 'object')
     AND (x.index->'expires' IS NULL OR tgs_index_expires(x.index->'expires') IS NOT NULL)`;

/**
 * The relay's delete (OUTBOX_DELETE's $1 and $2) with the index entries of the completed tasks $3 written by the
 * same statement. Used only for a batch that holds such a completion; every other batch runs OUTBOX_DELETE as before,
 * so tasks without `index.` routes cost no SQL. Measured on a batch of 500 rows (medians of 61): OUTBOX_DELETE
 * 6.56 ms, this with 1 indexed task 6.44 ms (within noise), with 50 indexed tasks 10.57 ms (~80 µs an entry).
 */
export const OUTBOX_DELETE_INDEXING = `${upsertStatement(completionEntries('$3'))},
  deferred AS (DELETE FROM outbox_deferred WHERE id = ANY($2))
  DELETE FROM outbox WHERE id = ANY($1)`;

/** The same upsert alone, for completions given by taskId (tests replay a batch's indexing with it). */
export const INDEX_COMPLETIONS = `${upsertStatement(completionEntries('$1'))} SELECT count(*)::int AS written FROM written`;
