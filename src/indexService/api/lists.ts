import { declare } from '../../api/endpoint.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { NAMESPACE_PARAM, checkNamespace } from '../namespace.js';
import { findTasksAt, listNamespaces as listNamespaceRows, listTasks as listTaskRows } from '../store.js';
import { listNamespacesSchema, listTasksAtIndexSchema, listTasksSchema } from './schemas.js';

/**
 * A list's namespace: '' (the root: Taskcluster's routes are `/namespaces{/:namespace}` and `/tasks{/:namespace}`, so
 * `/namespaces`, `/namespaces/` and the Python client's `/namespaces` for '' all list it) or an index path.
 */
function namespaceOf(params: Record<string, string>): string {
  const namespace = params.namespace ?? '';
  if (namespace !== '') checkNamespace(namespace, 'namespace');
  return namespace;
}

export const listNamespaces = declare({
  service: 'index',
  name: 'listNamespaces',
  title: 'List Namespaces',
  description:
    'The namespaces directly under a namespace (the root when it is empty) that hold an unexpired entry, by name, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/namespaces/<namespace>',
  optionalParam: 'namespace',
  params: { namespace: NAMESPACE_PARAM },
  scopes: 'index:list-namespaces:<namespace>',
  query: PAGE_QUERY,
  output: listNamespacesSchema,
  async handler(ctx) {
    const namespace = namespaceOf(ctx.params);
    const { page, next } = await readPage(ctx.query, (after, limit) => listNamespaceRows(ctx.deps.pool, namespace, after, limit), (n) => n.name);
    return { namespaces: page, ...next };
  },
});

export const listTasks = declare({
  service: 'index',
  name: 'listTasks',
  title: 'List Tasks',
  description: 'The unexpired entries directly in a namespace (the root when it is empty), by name, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/tasks/<namespace>',
  optionalParam: 'namespace',
  params: { namespace: NAMESPACE_PARAM },
  scopes: 'index:list-tasks:<namespace>',
  query: PAGE_QUERY,
  output: listTasksSchema,
  async handler(ctx) {
    const namespace = namespaceOf(ctx.params);
    const { page, next } = await readPage(ctx.query, (after, limit) => listTaskRows(ctx.deps.pool, namespace, after, limit), (t) => t.name);
    return { tasks: page.map(({ name: _name, ...entry }) => entry), ...next };
  },
});

/**
 * findTasksAtIndex's body: up to MAX_INDEX_PATHS paths of up to 255 characters, as JSON (~2.6 MB at worst; a decision
 * task's index search sends a few thousand paths of ~120 characters).
 */
const FIND_TASKS_BODY_LIMIT = 4 * 1024 * 1024;

export const findTasksAtIndex = declare<{ indexes: string[] }>({
  service: 'index',
  name: 'findTasksAtIndex',
  title: 'Find tasks at indexes',
  description:
    'The unexpired entries at the index paths of `indexes` (up to 10,000; the caller needs `index:find-task:<indexPath>` ' +
    'for each), by path, paged (limit ≤ 1000, continuationToken: send the same `indexes` with it). A path where ' +
    'nothing is indexed, or whose entry expired, is absent from the answer; a path listed twice answers once. ' +
    'Mozilla\'s taskgraph finds the tasks its index-search optimization may reuse with it.',
  method: 'post',
  route: '/tasks/indexes',
  query: PAGE_QUERY,
  scopes: { AllOf: [{ for: 'indexPath', in: 'indexPaths', each: 'index:find-task:<indexPath>' }] },
  input: listTasksAtIndexSchema,
  output: listTasksSchema,
  bodyLimit: FIND_TASKS_BODY_LIMIT,
  async handler({ body, query, deps, authorize }) {
    const indexPaths = [...new Set(body.indexes)];
    for (const path of indexPaths) checkNamespace(path);
    authorize({ indexPaths });
    if (indexPaths.length === 0) return { tasks: [] };
    const { page, next } = await readPage(query, (after, limit) => findTasksAt(deps.pool, indexPaths, after, limit), (t) => t.namespace);
    return { tasks: page, ...next };
  },
});
