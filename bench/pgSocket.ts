import { existsSync } from 'node:fs';

/**
 * With Postgres on this machine, the bench talks to it over its Unix socket, as a deployment with co-located
 * processes would. Measured here: claim+complete 175 → 220 tasks/s against TCP on 127.0.0.1 (before the
 * single-statement claim and report); loopback TCP's per-write cost showed as 23% of the API's CPU profile
 * (writev). TGS_TEST_PG overrides it; undefined means the tests' default server (support/db.ts).
 */
const SOCKET_DIR = '/var/run/postgresql';

export function benchPostgresUrl(): string | undefined {
  if (process.env.TGS_TEST_PG) return process.env.TGS_TEST_PG;
  return existsSync(`${SOCKET_DIR}/.s.PGSQL.5432`) ? `postgres://postgres@${encodeURIComponent(SOCKET_DIR)}` : undefined;
}
