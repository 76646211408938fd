import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { createPool } from '../../db/pool.js';
import { ISSUER_CLIENT_ID, rotateIssuerToken } from '../../auth/clients.js';
import { ISSUER_REFRESH_MS } from '../../auth/issuer.js';

export function registerRotateIssuerTokenCommand(program: Command): void {
  program
    .command('rotate-issuer-token')
    .description(`give ${ISSUER_CLIENT_ID} (which signs run credentials and artifact URLs) a new token in DATABASE_URL, after a leak`)
    .action(async () => {
      const pool = createPool(loadConfig().databaseUrl, 1);
      try {
        await rotateIssuerToken(pool);
      } finally {
        await pool.end();
      }
      console.log(
        `rotated the token of ${ISSUER_CLIENT_ID}: every tgs api uses the new one within ${ISSUER_REFRESH_MS / 1000} s. ` +
          'Run credentials and artifact URLs signed with the old one stop working: running tasks lose their claims ' +
          '(the queue retries them once the claims expire) and unfinished uploads must be made again.',
      );
    });
}
