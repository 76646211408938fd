import type { Command } from 'commander';
import type { Pool } from 'pg';
import { loadConfig } from '../../config.js';
import { createPool } from '../../db/pool.js';
import { dropDeadLetters, listDeadLetters, replayDeadLetters } from '../../relay/outboxStore.js';

/** Dead-letter ids as given on the command line: positive integers, refused before anything is done. */
function parseIds(words: string[]): number[] {
  const bad = words.filter((w) => !/^[1-9][0-9]{0,17}$/.test(w));
  if (bad.length > 0) throw new Error(`not a dead letter id: ${bad.map((w) => JSON.stringify(w)).join(', ')} (ids are the first column of \`tgs dead-letters list\`)`);
  return [...new Set(words.map(Number))];
}

/** Runs `action` on a one-connection pool of DATABASE_URL. */
async function withDatabase<T>(action: (pool: Pool) => Promise<T>): Promise<T> {
  const pool = createPool(loadConfig().databaseUrl, 1);
  try {
    return await action(pool);
  } finally {
    await pool.end();
  }
}

/** Says which ids were not there; exit code 1 if any. */
function reportMissing(asked: number[], done: number[]): void {
  const missing = asked.filter((id) => !done.includes(id));
  if (missing.length === 0) return;
  console.error(`no dead letter ${missing.join(', ')}`);
  process.exitCode = 1;
}

/**
 * `tgs dead-letters list|replay|drop`: the outbox rows the relay set aside because their message can never be
 * published (docs/operations.md § Dead-lettered messages), read and changed in DATABASE_URL directly, as an operator
 * of the deployment (no API call: the relay's tables have none).
 */
export function registerDeadLettersCommand(program: Command): void {
  const command = program.command('dead-letters').description('outbox messages the relay set aside because they can never be published (DATABASE_URL)');
  command
    .command('list')
    .description('list them: id, lane and id there, message id, exchange (or the exchange it is rendered for), when, why')
    .option('--json', 'one JSON object a line')
    .action(async (options: { json?: boolean }) => {
      const rows = await withDatabase(listDeadLetters);
      for (const row of rows) {
        if (options.json) console.log(JSON.stringify(row));
        else console.log([row.id, `${row.lane}/${row.source_id}`, row.message_id, row.exchange || `(${row.render})`, row.dead_lettered_at.toISOString(), row.reason].join('\t'));
      }
      if (!options.json) console.error(`${rows.length} dead letter(s)`);
    });
  const changing = (name: string, description: string, done: string, change: (pool: Pool, ids: number[]) => Promise<number[]>) =>
    command
      .command(name)
      .description(description)
      .argument('<ids...>', 'dead letter ids')
      .action(async (words: string[]) => {
        const ids = parseIds(words);
        const changed = await withDatabase((pool) => change(pool, ids));
        console.log(`${done} ${changed.length} dead letter(s)${changed.length > 0 ? `: ${changed.join(', ')}` : ''}`);
        reportMissing(ids, changed);
      });
  changing('replay', 'write them back to the outbox, in their order, for the relay to publish (once their cause is mended)', 'replayed', replayDeadLetters);
  changing('drop', 'delete them for good', 'dropped', dropDeadLetters);
}
