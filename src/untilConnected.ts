import { OutageLog } from './outageLog.js';

const TRANSIENT_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND', 'EPIPE',
  // Postgres: admin shutdown, crash shutdown, starting up, too many connections
  '57P01', '57P02', '57P03', '53300',
]);
const TRANSIENT_MESSAGE = /Connection terminated|Failed to connect|before the deadline|UNAVAILABLE|ECONNREFUSED|ECONNRESET|timeout expired/i;

/** A service that is down, starting or restarting, as opposed to a mistake retrying will not fix. */
export function isUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e = err as Error & { code?: unknown; cause?: unknown; errors?: unknown[] };
  // gRPC status 14 UNAVAILABLE and 4 DEADLINE_EXCEEDED (Temporal)
  if (TRANSIENT_CODES.has(String(e.code)) || e.code === 14 || e.code === 4 || TRANSIENT_MESSAGE.test(e.message)) return true;
  return isUnreachable(e.cause) || (Array.isArray(e.errors) && e.errors.some(isUnreachable));
}

export const FIRST_RETRY_MS = 250;
export const MAX_RETRY_MS = 10_000;

/**
 * Runs `attempt` until it succeeds, waiting between attempts with exponential backoff (250 ms doubling to
 * 10 s) while `what` is unreachable, as a process started together with (or before) Postgres or Temporal
 * must: says once that it is waiting and once that it connected. Any other error is thrown at once.
 */
export async function untilConnected<T>(what: string, attempt: () => Promise<T>, log: (line: string) => void): Promise<T> {
  const outage = new OutageLog(log, what);
  let delay = FIRST_RETRY_MS;
  for (;;) {
    try {
      const result = await attempt();
      outage.recovered('connected');
      return result;
    } catch (err) {
      if (!isUnreachable(err)) throw err;
      outage.failed(err, `waiting for it (retrying every ${FIRST_RETRY_MS} ms to ${MAX_RETRY_MS / 1000} s)`);
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
  }
}
