/**
 * The workflow's side of an amend (docs/formats.md § Amend; docs/temporal.md § The amendGraph and amend updates). The amend endpoint
 * stores everything in one transaction (new tasks for the replaced labels, the old ones canceled and no longer
 * members) and then sends the `amend` update: the run takes the superseded nodes out of its members and loads the new
 * ones as an extend's. Every field is checked, since anyone may send the update through Temporal. Pure, but for the
 * patch's name, which GraphRun asks.
 */
import type { AmendAccepted, AmendGraphRequest, AmendRequest } from './contract.js';
import type { GraphModel } from './graphModel.js';

/**
 * Runs with this patch have the `amend` update. Asked in the handler (only an amend reaches it), so a history with an
 * amend records the marker where it applied, and the recorded histories of runs without amends replay unchanged.
 */
export const AMEND_PATCH = 'amend-update';

/**
 * Runs with this patch have the `amendGraph` update (a Temporal-native amend: the workflow's activity stores the file).
 * Asked in its handler, as AMEND_PATCH is.
 */
export const AMEND_GRAPH_PATCH = 'amend-graph-update';

/** Why an `amendGraph` update is refused before anything runs: the shape only (the activity checks the rest). */
export function amendGraphRefusal(model: GraphModel, req: AmendGraphRequest | undefined): string | undefined {
  if (model.canceled) return 'the task-graph is canceled';
  const tasks = req?.tasks;
  if (tasks === null || typeof tasks !== 'object' || Array.isArray(tasks)) return 'the argument must be the edited graph file: {tasks: {<label>: {requires, task}, ...}, dryRun?}';
  if (req?.dryRun !== undefined && typeof req.dryRun !== 'boolean') return 'dryRun must be true or false';
  return undefined;
}

/** Why an amend update is refused, or undefined: checked by its validator, before anything is recorded. */
export function amendRefusal(model: GraphModel, req: AmendRequest | undefined): string | undefined {
  if (model.canceled) return 'the task-graph is canceled';
  if (!req || typeof req.nodeCount !== 'number' || !Number.isInteger(req.nodeCount) || req.nodeCount < 0) return 'nodeCount must be a whole number';
  if (!Array.isArray(req.superseded) || req.superseded.some((i) => !Number.isInteger(i) || i < 0 || i >= Math.max(req.nodeCount, model.size))) {
    return 'superseded must be a list of node indexes below nodeCount';
  }
  return undefined;
}

/**
 * Applies a validated amend to the model (pure): the superseded nodes that were loaded stop being members; those not
 * loaded yet load as non-members (their rows say so).
 */
export function applyAmend(model: GraphModel, req: AmendRequest): AmendAccepted {
  let superseded = 0;
  for (const i of req.superseded) if (i < model.size && model.supersede(i)) superseded++;
  return { superseded, nodeCount: Math.max(req.nodeCount, model.size) };
}
