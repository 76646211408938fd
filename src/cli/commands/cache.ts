import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import type { CacheExplanation } from '../../taskCache/explain.js';
import { withClient } from '../withClient.js';

interface WhyOptions {
  graph?: string;
  compare?: string;
  json?: boolean;
}

const SLUGID = /^[A-Za-z0-9_-]{22}$/;

/** `tgs cache why|list|purge`: cached graph nodes (docs/formats.md § Cached tasks). */
export function registerCacheCommand(program: Command): void {
  const cache = program
    .command('cache')
    .description('why a cached node ran or was reused; list and purge cache entries; uses TGS_ROOT_URL, and TGS_CLIENT_ID / TGS_ACCESS_TOKEN when set');
  cache
    .command('why <taskIdOrLabel>')
    .description('the key of a cached node, what it was made of, and what each tier held when the node became ready (a label needs --graph)')
    .option('--graph <taskGraphId>', 'the graph of a label (default: the task\'s group)')
    .option('--compare <taskId>', 'another cached task: which inputs differ, and where in the payload')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskIdOrLabel: string, opts: WhyOptions) => {
      const resolved = resolveCredentials();
      const explanation = await withClient(resolved, async (c) => {
        let graph = opts.graph;
        if (!graph) {
          if (!SLUGID.test(taskIdOrLabel)) throw new Error(`${taskIdOrLabel} is not a taskId: name its graph with --graph <taskGraphId>`);
          graph = (await c.api.request<{ taskGroupId: string }>('queue', 'GET', `/task/${taskIdOrLabel}`)).taskGroupId;
        }
        const query = opts.compare ? `?compareTo=${encodeURIComponent(opts.compare)}` : '';
        return c.api.request<CacheExplanation>('scheduler', 'GET', `/task-graph/${graph}/cache/${encodeURIComponent(taskIdOrLabel)}${query}`);
      });
      if (opts.json) {
        console.log(JSON.stringify(explanation, null, 2));
        return;
      }
      const e = explanation;
      console.log(`${e.label} (${e.taskId}): ${e.summary}`);
      console.log(`  key      ${e.key}  (name ${e.name}, tier ${e.tier}, mode ${e.mode}${e.maxAge !== undefined ? `, maxAge ${e.maxAge}s` : ''})`);
      if (e.path) console.log(`  entry    ${e.path}`);
      console.log(`  inputs   taskQueueId ${e.inputs.taskQueueId}; scopes ${JSON.stringify(e.inputs.scopes)}; requires ${e.inputs.requires.length} key(s); digestData ${JSON.stringify(e.inputs.digestData)}`);
      if (e.lookup) console.log(`  lookup   ${e.lookup.map((l) => `${l.tier}: ${l.result}${l.taskId ? ` (${l.taskId})` : ''}`).join(', ')} at ${e.lookedUp}`);
      console.log(`  now      ${e.now.map((l) => `${l.tier}: ${l.result}${l.taskId ? ` (${l.taskId})` : ''}`).join(', ')}`);
      if (e.comparedTo) {
        const c = e.comparedTo;
        if (c.sameKey) console.log(`  compared with ${c.taskId}: the same key`);
        else console.log(`  compared with ${c.taskId}: ${c.differing.join(', ')} differ${c.payloadPaths.length ? ` (payload at ${c.payloadPaths.join(', ')})` : ''}`);
      }
    });
  cache
    .command('list <tier> <name>')
    .description('the unexpired entries of a cache name in a tier: key, taskId, expires')
    .option('--json', 'print the API answer as JSON')
    .action(async (tier: string, name: string, opts: { json?: boolean }) => {
      const resolved = resolveCredentials();
      const entries = await withClient(resolved, async (c) => {
        const all: { key: string; taskId: string; expires: string }[] = [];
        let token: string | undefined;
        do {
          const page = await c.api.request<{ entries: typeof all; continuationToken?: string }>(
            'scheduler', 'GET', `/cache/${encodeURIComponent(tier)}/${encodeURIComponent(name)}${token ? `?continuationToken=${encodeURIComponent(token)}` : ''}`,
          );
          all.push(...page.entries);
          token = page.continuationToken;
        } while (token);
        return all;
      });
      if (opts.json) console.log(JSON.stringify(entries, null, 2));
      else for (const e of entries) console.log(`${e.key}  ${e.taskId}  expires ${e.expires}`);
    });
  cache
    .command('purge <tier> <name> [key]')
    .description('remove one entry (with key) or every entry of a cache name in a tier, so the next lookup misses; the tasks stay')
    .action(async (tier: string, name: string, key: string | undefined) => {
      const resolved = resolveCredentials();
      const path = `/cache/${encodeURIComponent(tier)}/${encodeURIComponent(name)}${key ? `/${encodeURIComponent(key)}` : ''}`;
      const { purged } = await withClient(resolved, (c) => c.api.request<{ purged: number }>('scheduler', 'DELETE', path));
      console.log(`purged ${purged} entr${purged === 1 ? 'y' : 'ies'} of ${tier}/${name}${key ? `/${key}` : ''}`);
    });
}
