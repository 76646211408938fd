import { declare } from '../../api/endpoint.js';
import { PAGE_QUERY, pagedListSchema, readPage } from '../../api/paging.js';
import { SLUGID } from '../../api/patterns.js';
import { TgsError } from '../../errors.js';
import { deleteIndexedTask, deleteIndexedTasksIn, listTasks } from '../../indexService/store.js';
import { requireGraph } from '../graphStore.js';
import { LABEL_PATTERN } from '../graphSchema.js';
import { GET_TASK_GRAPH } from './shapes.js';
import { explainCache } from '../../taskCache/explain.js';
import { cacheRow, cacheRowByLabel } from '../../taskCache/store.js';
import { CACHE_NAMESPACE, CACHE_WORD, cachePath } from '../../taskCache/tiers.js';

/** The cache's endpoints, in the scheduler's API (docs/formats.md § Cached tasks). */

const CACHE_KEY = /^[0-9a-f]{64}$/;
const cacheParams = { cacheTier: CACHE_WORD, cacheName: CACHE_WORD, cacheKey: CACHE_KEY };

export const explainTaskCacheEndpoint = declare({
  service: 'scheduler',
  name: 'explainTaskCache',
  title: 'Explain a Cached Task (tgs extension)',
  description:
    'Why a cached node ran or was reused (docs/formats.md § Cached tasks): its key and the inputs it was made of, its mode, what the lookup found in each tier when the task became ready ' +
    '(`hit`, `miss`, `expired`, `source-failed`, `expires-before-deadline`, `artifact-expires`), where a reused run came from, and what a lookup would find now. ' +
    '`compareTo=<taskId>` (another cached task, whose graph the caller may read too) adds which inputs differ and where in the payload.',
  method: 'get',
  route: '/task-graph/<taskGraphId>/cache/<taskIdOrLabel>',
  params: { taskIdOrLabel: new RegExp(LABEL_PATTERN) },
  query: { compareTo: SLUGID },
  scopes: GET_TASK_GRAPH,
  concurrency: 'graphReads',
  async handler(ctx) {
    const { params, query, deps } = ctx;
    await requireGraph(deps.pool, params.taskGraphId);
    const row = (SLUGID.test(params.taskIdOrLabel) ? await cacheRow(deps.pool, params.taskIdOrLabel) : undefined) ?? (await cacheRowByLabel(deps.pool, params.taskGraphId, params.taskIdOrLabel));
    if (!row || row.taskGraphId !== params.taskGraphId) {
      throw new TgsError('ResourceNotFound', `task-graph ${params.taskGraphId} has no cached task ${params.taskIdOrLabel}: only nodes with \`cache\` have keys`);
    }
    let other;
    if (query.compareTo !== undefined) {
      other = await cacheRow(deps.pool, query.compareTo);
      if (!other) throw new TgsError('ResourceNotFound', `task ${query.compareTo} is not a cached task: there is nothing to compare with`);
      ctx.authorizeExpression(`scheduler:get-task-graph:${other.taskGraphId}`);
    }
    return explainCache(deps.pool, deps.config.cacheTiers, row, other, new Date());
  },
});

const entrySchema = {
  type: 'object',
  additionalProperties: false,
  required: ['key', 'taskId', 'expires', 'namespace'],
  properties: { key: { type: 'string' }, taskId: { type: 'string' }, expires: { type: 'string' }, namespace: { type: 'string' } },
};

export const listCacheEntriesEndpoint = declare({
  service: 'scheduler',
  name: 'listCacheEntries',
  title: 'List Cache Entries (tgs extension)',
  description:
    'The unexpired entries of one cache name in one tier, by key, paged: each the index entry `tgs.cache.<tier>.<name>.<key>` (what the index API lists too).',
  method: 'get',
  route: '/cache/<cacheTier>/<cacheName>',
  params: cacheParams,
  query: PAGE_QUERY,
  scopes: `index:list-tasks:${CACHE_NAMESPACE}.<cacheTier>.<cacheName>`,
  output: pagedListSchema('entries', entrySchema),
  async handler({ params, query, deps }) {
    const namespace = `${CACHE_NAMESPACE}.${params.cacheTier}.${params.cacheName}`;
    const { page, next } = await readPage(query, (after, limit) => listTasks(deps.pool, namespace, after, limit), (e) => e.name);
    return { entries: page.map((e) => ({ key: e.name, taskId: e.taskId, expires: e.expires, namespace: e.namespace })), ...next };
  },
});

const purgedSchema = { type: 'object', additionalProperties: false, required: ['purged'], properties: { purged: { type: 'integer' } } };

export const purgeCacheEndpoint = declare({
  service: 'scheduler',
  name: 'purgeCache',
  title: 'Purge a Cache Name (tgs extension)',
  description:
    'Removes every entry of one cache name in one tier, so the next lookup of any of its keys misses (the tasks and artifacts stay). Answers how many entries there were.',
  method: 'delete',
  route: '/cache/<cacheTier>/<cacheName>',
  params: cacheParams,
  scopes: 'scheduler:purge-cache:<cacheTier>/<cacheName>/*',
  output: purgedSchema,
  async handler({ params, deps }) {
    return { purged: await deleteIndexedTasksIn(deps.pool, `${CACHE_NAMESPACE}.${params.cacheTier}.${params.cacheName}`) };
  },
});

export const purgeCacheKeyEndpoint = declare({
  service: 'scheduler',
  name: 'purgeCacheKey',
  title: 'Purge a Cache Entry (tgs extension)',
  description: 'Removes the entry of one key of a cache name in one tier. Answers 1, or 0 when there was none.',
  method: 'delete',
  route: '/cache/<cacheTier>/<cacheName>/<cacheKey>',
  params: cacheParams,
  scopes: 'scheduler:purge-cache:<cacheTier>/<cacheName>/<cacheKey>',
  output: purgedSchema,
  async handler({ params, deps }) {
    return { purged: (await deleteIndexedTask(deps.pool, cachePath(params.cacheTier, params.cacheName, params.cacheKey))) ? 1 : 0 };
  },
});

export const cacheEndpoints = [explainTaskCacheEndpoint, listCacheEntriesEndpoint, purgeCacheEndpoint, purgeCacheKeyEndpoint];
