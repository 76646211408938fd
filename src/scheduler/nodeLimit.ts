import type { Config } from '../config.js';
import { TgsError } from '../errors.js';

/**
 * Two per-run limits of Temporal bound a graph's size. A graph's workflow carries 4 bytes a node across
 * continue-as-new (src/workflows/codec.ts) and Temporal refuses a workflow input over 2 MB: about 450,000 nodes.
 * And each run loads the graph's structure through activities into its history, ~91 bytes a node (the bench's
 * 300,000-task graph: 26.1 MB in its largest run), while the workflow continues as new once its history passes
 * 32 MB (src/workflows/continueAsNew.ts): well past ~350,000 nodes a run would continue as new straight after
 * loading, without progress. Create and extend refuse to go past TGS_MAX_GRAPH_NODES (default 300,000, which the
 * bench runs to the end) with a 400 as soon as the count passes it; the transaction keeps nothing. `existing` counts every node the graph has (members and
 * external).
 */
export function refuseOverNodeLimit(config: Pick<Config, 'maxGraphNodes'>, taskGraphId: string, existing: number, adding: number): void {
  if (existing + adding <= config.maxGraphNodes) return;
  throw new TgsError(
    'InputValidationError',
    `task-graph ${taskGraphId} would have ${existing + adding} nodes (${existing} existing + ${adding} new); this deployment allows at most ${config.maxGraphNodes} (TGS_MAX_GRAPH_NODES)`,
    { maxGraphNodes: config.maxGraphNodes, nodes: existing + adding },
  );
}
