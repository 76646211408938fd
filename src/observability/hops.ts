import { graphHop } from './metrics.js';

/**
 * Observes tgs_graph_hop_seconds for tasks of a graph that just became pending: for each, the time from the latest
 * resolution among its requirements (the run's `resolved`, written by the API that took the report) to its own
 * `scheduled` (written by the dispatch activity). Both come from the dispatch's own reads (src/queue/readiness.ts
 * and the scheduled run), so every dispatched task is measured at no cost to Postgres. Roots have no requirements
 * and no hop. The two timestamps come from two processes' clocks; on one host (or NTP-synced hosts) that is
 * ms-accurate.
 */
export function observeHops(tasks: { scheduled: string | undefined; latestRequirementResolved: number | null | undefined }[]): void {
  for (const { scheduled, latestRequirementResolved } of tasks) {
    if (scheduled === undefined || latestRequirementResolved === null || latestRequirementResolved === undefined) continue;
    graphHop.observe(Math.max(0, Date.parse(scheduled) - latestRequirementResolved) / 1000);
  }
}
