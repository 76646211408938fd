import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { registerApiCommand } from './commands/api.js';
import { registerMigrateCommand } from './commands/migrate.js';
import { registerSchedulerWorkerCommand } from './commands/schedulerWorker.js';
import { registerBridgeCommand } from './commands/bridge.js';
import { registerDevCommand } from './commands/dev.js';
import { registerRelayCommand } from './commands/relay.js';
import { registerClientCommand } from './commands/client.js';
import { registerShellWorkerCommand } from './commands/shellWorker.js';
import { registerGraphCommand } from './commands/graph.js';
import { registerTaskCommand } from './commands/task.js';
import { registerRotateIssuerTokenCommand } from './commands/rotateIssuerToken.js';
import { registerIndexCommand } from './commands/indexLookup.js';
import { registerCacheCommand } from './commands/cache.js';
import { registerHookCommand } from './commands/hook.js';
import { registerDeadLettersCommand } from './commands/deadLetters.js';
import { registerRoleCommand } from './commands/role.js';

/** The package's version: package.json is two levels up from src/cli/ and from dist/cli/ alike. */
function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}

/** The `tgs` program: every command registers itself from src/cli/commands/<command>.ts. */
export function buildProgram(): Command {
  const program = new Command('tgs')
    .description('tgs: a Taskcluster-compatible task queue and task-graph scheduler on Temporal')
    .version(`tgs ${packageVersion()} (node ${process.version})`, '-V, --version', 'print the version of tgs and of node')
    .showHelpAfterError();
  registerApiCommand(program);
  registerMigrateCommand(program);
  registerSchedulerWorkerCommand(program);
  registerBridgeCommand(program);
  registerDevCommand(program);
  registerRelayCommand(program);
  registerClientCommand(program);
  registerRoleCommand(program);
  registerShellWorkerCommand(program);
  registerGraphCommand(program);
  registerTaskCommand(program);
  registerRotateIssuerTokenCommand(program);
  registerIndexCommand(program);
  registerCacheCommand(program);
  registerHookCommand(program);
  registerDeadLettersCommand(program);
  return program;
}

/** `tgs <command>` */
export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    console.error(`tgs: ${(err as Error).message}`);
    process.exitCode = 1;
  }
}
