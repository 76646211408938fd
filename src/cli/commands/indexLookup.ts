import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import { checkNamespace } from '../../indexService/namespace.js';
import type { IndexedTask } from '../../indexService/store.js';
import { withClient } from '../withClient.js';

/** `tgs index find <path>`: the task indexed at an index path (docs/formats.md § The index). */
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
}
