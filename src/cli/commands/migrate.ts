import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { createPool } from '../../db/pool.js';
import { ensureDatabase, migrate } from '../../db/migrate.js';

export function registerMigrateCommand(program: Command): void {
  program
    .command('migrate')
    .description('apply database migrations to DATABASE_URL')
    .action(async () => {
      await ensureDatabase(loadConfig().databaseUrl);
      const pool = createPool(loadConfig().databaseUrl, 1);
      try {
        // migrate() says what it applied, in one line
        const applied = await migrate(pool, (line) => console.log(line));
        if (applied.length === 0) console.log('database is up to date');
      } finally {
        await pool.end();
      }
    });
}
