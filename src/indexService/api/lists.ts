import { declare } from '../../api/endpoint.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { NAMESPACE_PARAM, checkNamespace } from '../namespace.js';
import { listNamespaces as listNamespaceRows, listTasks as listTaskRows } from '../store.js';
import { listNamespacesSchema, listTasksSchema } from './schemas.js';

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
