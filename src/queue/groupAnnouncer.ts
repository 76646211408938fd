import type pg from 'pg';
import type { Config } from '../config.js';
import { prepared, withTransaction } from '../db/pool.js';
import { DONE_GROUPS_SQL, resolveTaskGroupsIfDone } from './taskGroups.js';

/**
 * task-group-resolved for reports, after they committed, one check per group per interval instead of one
 * per report. Checking in the report itself cost 2.2 ms a report on a 10,000-task group (the partial index of
 * unresolved tasks still holds every dead version of the group's tasks until vacuum, and a bitmap scan walks
 * them all: 12,000 entries near the group's end) and capped a 10k graph at ~300 tasks/s.
 *
 * Checked after the commits, so of reports committing at once the check sees all of them. A group noted
 * but not yet checked when the process dies is announced by the sweep (announceResolvedGroups). Like
 * Taskcluster's, the announcement follows the last resolution instead of being part of it.
 */
export class GroupAnnouncer {
  private readonly noted = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly config: Config,
    private readonly intervalMs = 50,
    private readonly log: (line: string) => void = (line) => console.error(line),
  ) {}

  /** A task of this group resolved (committed). */
  note(taskGroupId: string): void {
    this.noted.add(taskGroupId);
    if (!this.timer && !this.stopped) this.timer = setTimeout(() => void this.flush(), this.intervalMs);
  }

  /** Checks every noted group now; resolves when done (tests and shutdown). */
  async flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.running) await this.running;
    if (this.noted.size === 0) return;
    const ids = [...this.noted];
    this.noted.clear();
    this.running = this.check(ids).finally(() => {
      this.running = undefined;
      if (this.noted.size > 0 && !this.timer && !this.stopped) this.timer = setTimeout(() => void this.flush(), this.intervalMs);
    });
    await this.running;
  }

  private async check(ids: string[]): Promise<void> {
    try {
      const { rows } = await this.pool.query<{ task_group_id: string }>(prepared(DONE_GROUPS_SQL, [ids]));
      if (rows.length === 0) return;
      await withTransaction(this.pool, (client) => resolveTaskGroupsIfDone(client, this.config, rows.map((r) => r.task_group_id)));
    } catch (err) {
      this.log(`task-group-resolved check of ${ids.length} group(s) failed, the sweep will announce them: ${(err as Error).message}`);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.flush();
  }
}
