import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import { checkNamespace } from '../../indexService/namespace.js';
import type { IndexedTask, IndexNamespace } from '../../indexService/store.js';
import type { TgsClient } from '../../client/tgsClient.js';
import { withClient } from '../withClient.js';

/** Every page of one of the index's lists under `namespace` ('' for the root). */
async function listAll<T>(client: TgsClient, list: 'namespaces' | 'tasks', namespace: string): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  do {
    const page = await client.api.request<Record<string, unknown>>(
      'index',
      'GET',
      `/${list}/${encodeURIComponent(namespace)}${token ? `?continuationToken=${encodeURIComponent(token)}` : ''}`,
    );
    items.push(...(page[list] as T[]));
    token = page.continuationToken as string | undefined;
  } while (token);
  return items;
}

/** `tgs index find <path>` and `tgs index list [namespace]` (docs/formats.md § The index). */
export function registerIndexCommand(program: Command): void {
  const index = program
    .command('index')
    .description('read the index (Taskcluster\'s index service); uses TGS_ROOT_URL, and TGS_CLIENT_ID / TGS_ACCESS_TOKEN when set');
  index
    .command('find <indexPath>')
    .description('print the task indexed at an index path (e.g. my.project.latest): taskId, rank, expires, data')
    .option('--json', 'print the API response as JSON')
    .action(async (indexPath: string, opts: { json?: boolean }) => {
      checkNamespace(indexPath);
      const resolved = resolveCredentials();
      const entry = await withClient(resolved, (c) => c.api.request<IndexedTask>('index', 'GET', `/task/${encodeURIComponent(indexPath)}`));
      if (opts.json) {
        console.log(JSON.stringify(entry, null, 2));
        return;
      }
      console.log(`taskId   ${entry.taskId}`);
      console.log(`rank     ${entry.rank}`);
      console.log(`expires  ${entry.expires}`);
      console.log(`data     ${JSON.stringify(entry.data)}`);
    });
  index
    .command('list [namespace]')
    .description('what is directly under a namespace (the root without one): its namespaces, then its indexed tasks')
    .option('--json', 'print {"namespaces": [...], "tasks": [...]} as JSON')
    .action(async (namespace: string | undefined, opts: { json?: boolean }) => {
      const at = (namespace ?? '').replace(/\.$/, '');
      if (at) checkNamespace(at, 'namespace');
      const resolved = resolveCredentials();
      const { namespaces, tasks } = await withClient(resolved, async (c) => ({
        namespaces: await listAll<IndexNamespace>(c, 'namespaces', at),
        tasks: await listAll<IndexedTask>(c, 'tasks', at),
      }));
      if (opts.json) {
        console.log(JSON.stringify({ namespaces, tasks }, null, 2));
        return;
      }
      if (namespaces.length === 0 && tasks.length === 0) {
        console.log(`nothing is indexed under ${at || 'the root'} (a task indexes itself with a route index.<path>: docs/formats.md § The index)`);
        return;
      }
      const width = Math.max('NAME'.length, ...namespaces.map((n) => n.namespace.length + 1), ...tasks.map((t) => t.namespace.length));
      console.log(`${'NAME'.padEnd(width)}  TASK ID                 RANK  EXPIRES`);
      for (const n of namespaces) console.log(`${`${n.namespace}.`.padEnd(width)}  ${'-'.padEnd(22)}  ${'-'.padEnd(4)}  ${n.expires}`);
      for (const t of tasks) console.log(`${t.namespace.padEnd(width)}  ${t.taskId.padEnd(22)}  ${String(t.rank).padEnd(4)}  ${t.expires}`);
    });
}
