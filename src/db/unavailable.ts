import { isUnreachable } from '../untilConnected.js';

/**
 * SQLSTATEs of a Postgres that refuses or ends sessions for a while, as a managed service does during a failover,
 * a maintenance window or with its connection slots taken: 28000 (the role may not log in now, NOLOGIN), 53300 (too
 * many connections, or the role's or database's CONNECTION LIMIT), 57P01-57P03 (shutting down, starting up), class 08
 * (connection exceptions).
 */
const REFUSED = new Set(['28000', '53300', '57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);

/**
 * Whether a query failed because Postgres (or the network to it) is unavailable, not because of the statement: the
 * API answers such a failure 503 ServiceUnavailable (the caller retries) instead of 500.
 */
export function isPostgresUnavailable(err: unknown): boolean {
  return REFUSED.has(String((err as { code?: unknown } | undefined)?.code)) || isUnreachable(err);
}
