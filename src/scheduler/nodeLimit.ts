import type { Config } from '../config.js';
import { TgsError } from '../errors.js';

/**
 * A graph's workflow carries ~8 bytes a node across continue-as-new (base64 of states, reruns left, last
 * runId, reset flags) and Temporal refuses a workflow input over 2 MB, so a graph much past 260,000 nodes
 * would stall at its first continue-as-new. Create and extend refuse to go past TGS_MAX_GRAPH_NODES (default
 * 200,000) before anything is written. `existing` counts every node the graph has (members and external).
 */
export function refuseOverNodeLimit(config: Pick<Config, 'maxGraphNodes'>, taskGraphId: string, existing: number, adding: number): void {
  if (existing + adding <= config.maxGraphNodes) return;
  throw new TgsError(
    'InputValidationError',
    `task-graph ${taskGraphId} would have ${existing + adding} nodes (${existing} existing + ${adding} new); this deployment allows at most ${config.maxGraphNodes} (TGS_MAX_GRAPH_NODES)`,
    { maxGraphNodes: config.maxGraphNodes, nodes: existing + adding },
  );
}
