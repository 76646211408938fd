import { Context } from '@temporalio/activity';

/**
 * How often a bulk activity heartbeats while it runs. The workflow gives these activities a heartbeat timeout
 * of 30 s (src/workflows/activityProxies.ts): the server retries one elsewhere when no heartbeat came for that long. Without a heartbeat, an activity whose worker was SIGKILLed is only
 * retried at its start-to-close timeout (5 minutes: a graph stalled that long). A timer, not progress, drives
 * the heartbeat: one loadNodes page is one query that may take seconds on a starved machine, and must not
 * time out for that; the timeout only has to tell a live worker from a dead one. 30 s leaves room for a
 * worker's event loop stalled by a load average of 30 (multi-second timer delays were seen here).
 */
export const BULK_HEARTBEAT_EVERY_MS = 5_000;

/** Runs fn, heartbeating every BULK_HEARTBEAT_EVERY_MS while it runs (outside an activity: just runs it). */
export async function withHeartbeat<T>(fn: () => Promise<T>): Promise<T> {
  let context: Context | undefined;
  try {
    context = Context.current();
  } catch {
    context = undefined;
  }
  if (!context) return fn();
  const ctx = context;
  ctx.heartbeat();
  const timer = setInterval(() => ctx.heartbeat(), BULK_HEARTBEAT_EVERY_MS);
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
