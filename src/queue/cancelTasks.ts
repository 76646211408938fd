import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { applyChange } from './applyChange.js';
import { resolutionMessage } from './messages.js';
import { resolveLatestRun, type TaskStatus } from './taskRow.js';
import { isResolved } from '../taskStates.js';

/** Every unresolved task becomes exception/canceled (a run is added to one that has none). */
export async function cancelTasks(db: Queryable, config: Config, taskIds: string[]): Promise<TaskStatus[]> {
  const now = new Date();
  const { statuses } = await applyChange(db, config, taskIds, (row) => {
    if (isResolved(row.state)) return undefined;
    const run = resolveLatestRun(row, 'exception', 'canceled', now);
    return [resolutionMessage(config, row, run.runId)];
  });
  return statuses;
}
