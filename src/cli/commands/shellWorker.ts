import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import { startShellWorker } from '../../shellWorker/index.js';
import { onShutdown } from '../shutdown.js';

interface Options {
  provisionerId: string;
  workerType: string;
  capacity: string;
  workerGroup?: string;
  workerId?: string;
  workDir?: string;
}

export function registerShellWorkerCommand(program: Command): void {
  program
    .command('shell-worker')
    .summary('claim tasks of one worker pool and run their payload.command as local processes')
    .description(
      'claim tasks of one worker pool and run payload.command as a local process (argv array, or a string run by /bin/sh -c); ' +
        'payload: {command, maxRunTime, env?, artifacts?: [{name, path, type: "file", contentType?, expires?}]}. ' +
        'Uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN (needs queue:claim-work:<provisionerId>/<workerType> and queue:worker-id:<workerGroup>/<workerId>)',
    )
    .requiredOption('--provisioner-id <id>', 'provisionerId of the tasks to claim')
    .requiredOption('--worker-type <type>', 'workerType of the tasks to claim')
    .option('--capacity <n>', 'how many tasks run at once', '1')
    .option('--worker-group <group>', 'workerGroup reported to the queue', 'tgs-shell')
    .option('--worker-id <id>', 'workerId reported to the queue (default <hostname>-<pid>)')
    .option('--work-dir <dir>', 'parent of the per-task working directories (default: the OS temp dir)')
    .action(async (opts: Options) => {
      const resolved = resolveCredentials();
      const capacity = Number(opts.capacity);
      const worker = startShellWorker({
        rootUrl: resolved.rootUrl,
        credentials: resolved.credentials,
        provisionerId: opts.provisionerId,
        workerType: opts.workerType,
        capacity,
        workerGroup: opts.workerGroup,
        workerId: opts.workerId,
        workDir: opts.workDir,
      });
      onShutdown(() => worker.stop());
      await worker.done;
    });
}
