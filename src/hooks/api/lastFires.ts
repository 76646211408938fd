import { declare } from '../../api/endpoint.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { TgsError } from '../../errors.js';
import { listLastFires as readLastFires } from '../store.js';
import { listLastFiresResponse } from './schemas.js';

/** The page key of a fire: its time and taskId (fires are listed newest first). */
const keyOf = (fire: { taskCreateTime: Date; taskId: string }) => `${fire.taskCreateTime.toISOString()} ${fire.taskId}`;

function parseKey(key: string): { time: string; taskId: string } | undefined {
  if (key === '') return undefined;
  const [time, taskId] = key.split(' ');
  if (!taskId || Number.isNaN(Date.parse(time))) throw new TgsError('InputError', 'Invalid continuationToken: pass the one from the previous page unchanged');
  return { time, taskId };
}

export const listLastFires = declare({
  service: 'hooks',
  name: 'listLastFires',
  title: 'Get information about recent hook fires',
  description:
    'The hook\'s fires, newest first, each with who fired it, the taskId, whether the task was created (or the ' +
    'error) and the task\'s state now; paged (limit ≤ 1000, continuationToken). 404 when the hook never fired.',
  method: 'get',
  route: '/hooks/<hookGroupId>/<hookId>/last-fires',
  query: PAGE_QUERY,
  scopes: 'hooks:list-last-fires:<hookGroupId>/<hookId>',
  output: listLastFiresResponse,
  async handler({ params, query, deps }) {
    const { page, next } = await readPage(
      query,
      (after, limit) => readLastFires(deps.pool, params.hookGroupId, params.hookId, { after: parseKey(after), limit }),
      keyOf,
    );
    if (page.length === 0) throw new TgsError('ResourceNotFound', `No such hook or never fired: ${params.hookGroupId}/${params.hookId}`);
    return { lastFires: page.map((f) => ({ ...f, taskCreateTime: f.taskCreateTime.toISOString() })), ...next };
  },
});
