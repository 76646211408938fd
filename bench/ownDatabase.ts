import pg from 'pg';
import { countPostgresDatabase } from './cpu.js';
import type { BenchStack } from './scenario.js';

/**
 * A database of its own on the stack's Postgres server (same server, same settings) for something measured beside
 * tgs, the peer or a floor: `<prefix>_<pid>`, dropped first if a killed run left it, its backends' CPU counted
 * (bench/cpu.ts countPostgresDatabase). `url` connects to it; `drop()` ends whatever is still connected and drops it.
 */
export async function ownDatabase(stack: BenchStack, prefix: string) {
  const name = `${prefix}_${process.pid}`;
  const at = (database: string) => Object.assign(new URL(stack.config.databaseUrl), { pathname: `/${database}` }).href;
  const admin = new pg.Client({ connectionString: at('postgres') });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${name}`);
  countPostgresDatabase(name);
  return {
    url: at(name),
    async drop() {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    },
  };
}
