import { existsSync } from 'node:fs';

/**
 * Imported first by bench/run.ts: with Postgres on this machine, talk to it over its Unix socket, as a
 * deployment with co-located processes would. Measured here: claim+complete 175 → 220 tasks/s against TCP
 * on 127.0.0.1 (before the single-statement claim and report); loopback TCP's per-write cost showed as 23%
 * of the API's CPU profile (writev). TGS_TEST_PG overrides it.
 */
const SOCKET_DIR = '/var/run/postgresql';
if (!process.env.TGS_TEST_PG && existsSync(`${SOCKET_DIR}/.s.PGSQL.5432`)) {
  process.env.TGS_TEST_PG = `postgres://postgres@${encodeURIComponent(SOCKET_DIR)}`;
}
