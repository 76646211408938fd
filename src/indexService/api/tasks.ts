import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { NAMESPACE_PARAM, checkNamespace } from '../namespace.js';
import { deleteIndexedTask, findTask as findIndexedTask, upsertIndexedTask, type IndexEntryInput } from '../store.js';
import { indexedTaskSchema, insertTaskSchema } from './schemas.js';

/** The entry at an index path, or 404 saying so. */
export async function entryAt(deps: { pool: Parameters<typeof findIndexedTask>[0] }, indexPath: string) {
  const entry = await findIndexedTask(deps.pool, indexPath);
  if (!entry) throw new TgsError('ResourceNotFound', `Indexed task not found: nothing is indexed at ${indexPath} (or its entry expired)`);
  return entry;
}

export const findTask = declare({
  service: 'index',
  name: 'findTask',
  title: 'Find Indexed Task',
  description: 'The task indexed at an index path (the one of highest rank indexed there), or 404 when none is or its entry expired.',
  method: 'get',
  route: '/task/<indexPath>',
  params: { indexPath: NAMESPACE_PARAM },
  scopes: 'index:find-task:<indexPath>',
  output: indexedTaskSchema,
  async handler({ params, deps }) {
    checkNamespace(params.indexPath);
    return entryAt(deps, params.indexPath);
  },
});

export const insertTask = declare<IndexEntryInput>({
  service: 'index',
  name: 'insertTask',
  title: 'Insert Task into Index',
  description:
    'Index a task at an index path. An entry of higher rank already there stays (the answer is 200 with that entry); one of lower or equal rank is replaced. The namespaces above the path are created.',
  method: 'put',
  route: '/task/<namespace>',
  params: { namespace: NAMESPACE_PARAM },
  scopes: 'index:insert-task:<namespace>',
  input: insertTaskSchema,
  output: indexedTaskSchema,
  async handler({ params, body, deps }) {
    checkNamespace(params.namespace);
    return upsertIndexedTask(deps.pool, params.namespace, body);
  },
});

export const deleteTask = declare({
  service: 'index',
  name: 'deleteTask',
  title: 'Remove Task from Index',
  description:
    'Remove the entry at an index path (answers `{}` whether or not there was one). The namespaces above it stay; entries of lower rank indexed there before were never kept, so none reappears.',
  method: 'delete',
  route: '/task/<namespace>',
  params: { namespace: NAMESPACE_PARAM },
  scopes: 'index:delete-task:<namespace>',
  async handler({ params, deps }) {
    checkNamespace(params.namespace);
    await deleteIndexedTask(deps.pool, params.namespace);
    return {};
  },
});
