import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import type { GraphStatus } from '../../client/tgsClient.js';
import { pastTime } from '../pastTime.js';
import { elapsed } from '../progress.js';
import { withClient } from '../withClient.js';

/** One graph as listTaskGraphs answers it. */
interface ListedGraph {
  status: GraphStatus;
  name: string;
  taskCount: number;
  counts: Record<string, number>;
  blockedBy: string[];
  created: string;
  updated: string;
}

const STATES = ['running', 'blocked', 'finished', 'canceled', 'terminated'];

interface ListOptions {
  state?: string;
  name?: string;
  since?: string;
  limit: string;
  json?: boolean;
}

/**
 * `tgs graph list`: graphs newest first, like `temporal workflow list` or `argo list`. The API filters by state;
 * the name (a substring, case ignored) and `--since` are applied here, reading pages until `--limit` graphs matched
 * or the graphs get older than `--since` (the list is newest first, so no older page can match).
 */
export function registerGraphListCommand(graph: Command): void {
  graph
    .command('list')
    .description('task-graphs, newest first: id, state, tasks completed, name, age')
    .option('--state <state>', `only graphs in this state (${STATES.join(', ')})`)
    .option('--name <text>', 'only graphs whose name contains this (case ignored)')
    .option('--since <when>', 'only graphs created since then: a duration ago (2h, 3d) or a date')
    .option('--limit <n>', 'at most this many graphs', '20')
    .option('--json', 'print the graphs as JSON')
    .action(async (opts: ListOptions) => {
      if (opts.state !== undefined && !STATES.includes(opts.state)) throw new Error(`--state ${JSON.stringify(opts.state)}: give one of ${STATES.join(', ')}`);
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1) throw new Error(`--limit ${JSON.stringify(opts.limit)}: give a whole number of graphs (1 or more)`);
      const since = opts.since === undefined ? undefined : pastTime(opts.since, '--since');
      const name = opts.name?.toLowerCase();
      const found: ListedGraph[] = [];
      await withClient(resolveCredentials(), async (c) => {
        let token: string | undefined;
        do {
          const query = new URLSearchParams({ limit: String(Math.min(1000, Math.max(limit, 50))) });
          if (opts.state) query.set('state', opts.state);
          if (token) query.set('continuationToken', token);
          const page = await c.api.request<{ taskGraphs: ListedGraph[]; continuationToken?: string }>('scheduler', 'GET', `/task-graphs?${query}`);
          for (const g of page.taskGraphs) {
            if (since !== undefined && g.created < since) return;
            if (name === undefined || g.name.toLowerCase().includes(name)) found.push(g);
            if (found.length === limit) return;
          }
          token = page.continuationToken;
        } while (token);
      });
      if (opts.json) {
        console.log(JSON.stringify(found, null, 2));
        return;
      }
      if (found.length === 0) {
        console.log('no task-graphs match (submit one: tgs graph submit <file>)');
        return;
      }
      const width = Math.max('NAME'.length, ...found.map((g) => g.name.length));
      console.log(`TASK GRAPH ID           STATE       TASKS      ${'NAME'.padEnd(width)}  CREATED`);
      const now = Date.now();
      for (const g of found) {
        const tasks = `${g.counts.completed ?? 0}/${g.taskCount}`;
        console.log(`${g.status.taskGraphId.padEnd(22)}  ${g.status.state.padEnd(10)}  ${tasks.padEnd(9)}  ${(g.name || '-').padEnd(width)}  ${g.created} (${elapsed(now - Date.parse(g.created))} ago)`);
      }
    });
}
