import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import { DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_KILL_GRACE_MS, startShellWorker, DEFAULT_LIMITS, parseSize, type IsolationMode, type NetworkMode } from '../../shellWorker/index.js';
import { fmtBytes } from '../../shellWorker/limits.js';
import { loadConfig } from '../../config.js';
import { lineLogger } from '../../log.js';
import { startObservability } from '../../observability/process.js';
import { onDrainSignals } from '../shutdown.js';
import { parseDuration } from '../../duration.js';

interface Options {
  provisionerId: string;
  workerType: string;
  capacity: string;
  workerGroup?: string;
  workerId?: string;
  workDir?: string;
  taskUser?: string;
  isolation?: string;
  network?: string;
  maxMemory: string;
  maxProcesses: string;
  cpus: string;
  maxTmp: string;
  maxFileSize: string;
  maxTaskDir: string;
  maxArtifactSize?: string;
  uidRange?: string;
  claimWork?: boolean;
  killGrace: string;
  drainTimeout: string;
}

/** `--kill-grace 10`, `--drain-timeout 5m`: plain seconds or a duration (`90s`, `5m`, `1h`). */
function seconds(flag: string, text: string): number {
  const ms = /^\s*\d+\s*$/.test(text) ? Number(text) * 1000 : (() => {
    try {
      return parseDuration(text);
    } catch {
      return NaN;
    }
  })();
  if (!Number.isFinite(ms) || ms < 0) throw new Error(`${flag} ${JSON.stringify(text)}: give seconds (e.g. 300) or a duration (e.g. 5m)`);
  return ms;
}

/** `--max-processes 512`, `--cpus 1.5`. */
function positive(flag: string, text: string, integer: boolean): number {
  const n = Number(text);
  if (!(n > 0) || (integer && !Number.isInteger(n))) throw new Error(`${flag} ${JSON.stringify(text)}: give a ${integer ? 'whole ' : ''}number above 0`);
  return n;
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
    .option('--work-dir <dir>', 'parent of the per-task working directories (default: the OS temp dir; when runs have their own uids, each directory on the way must be open to others, o+x)')
    .option(
      '--isolation <mode>',
      'how each run is sandboxed: bwrap (bubblewrap namespaces; as root also a fresh uid per run), user (root: a fresh uid per run) or none (unsafe: tasks can read the worker\'s credentials). ' +
        'Default: the strongest this machine gives; refuses to start when there is none',
    )
    .option(
      '--network <mode>',
      'what runs reach: api (the default: a network namespace of its own reaching only the tgs API), none, internet (slirp4netns: never the host\'s loopback, private ranges or own addresses) or host (unsafe: every service the worker reaches); TGS_SHELL_WORKER_NETWORK. A payload\'s `network` may narrow it',
    )
    .option('--max-memory <size>', "each run's memory, /tmp's tmpfs pages included (a cgroup of its own; e.g. 512M, 4G)", fmtBytes(DEFAULT_LIMITS.memoryBytes).replace(' GiB', 'G'))
    .option('--max-processes <n>', "each run's processes and threads (a cgroup's pids.max, and RLIMIT_NPROC when the run has a uid of its own)", String(DEFAULT_LIMITS.processes))
    .option('--cpus <n>', "each run's CPU time, in CPUs (a cgroup's CPU quota; e.g. 0.5, 2)", String(DEFAULT_LIMITS.cpus))
    .option('--max-tmp <size>', "bwrap: the size of each run's /tmp and /var/tmp (tmpfs)", fmtBytes(DEFAULT_LIMITS.tmpBytes).replace(' GiB', 'G'))
    .option('--max-file-size <size>', 'the largest file a run may write (RLIMIT_FSIZE)', fmtBytes(DEFAULT_LIMITS.fileBytes).replace(' GiB', 'G'))
    .option('--max-task-dir <size>', "what a run's directory may hold (checked every second; the run is killed past it)", fmtBytes(DEFAULT_LIMITS.taskDirBytes).replace(' GiB', 'G'))
    .option('--max-artifact-size <size>', 'the largest artifact file a run uploads; a larger one is refused before it is read (default: TGS_MAX_ARTIFACT_BYTES, else 64M, the API\'s default)')
    .option('--uid-range <first-last>', 'the uids runs get (isolation user, and bwrap as root); no account may have one', '1500000-1565535')
    .option(
      '--task-user <name>',
      'the OS user bwrap sandboxes run as instead of a fresh uid per run, or every task runs as with --isolation none (worker must be root); not used by --isolation user, which gives each run its own uid',
    )
    .option('--claim-work', 'poll claimWork instead of holding a worker stream (a proxy in between that cannot carry WebSockets)')
    .option(
      '--kill-grace <seconds>',
      'a canceled run\'s command gets SIGTERM at once (over the worker stream: within a moment of the cancel) and SIGKILL this long after; a payload\'s killGrace overrides it (0-600)',
      String(DEFAULT_KILL_GRACE_MS / 1000),
    )
    .option(
      '--drain-timeout <duration>',
      'on SIGTERM or SIGINT: stop claiming and let running tasks finish for up to this long (seconds, or e.g. 5m), then report the rest worker-shutdown and exit; a second signal stops at once',
      String(DEFAULT_DRAIN_TIMEOUT_MS / 1000),
    )
    .action(async (opts: Options) => {
      const resolved = resolveCredentials();
      const { log, metrics } = await startObservability(loadConfig(), 'shell-worker');
      try {
        const worker = startShellWorker({
          rootUrl: resolved.rootUrl,
          credentials: resolved.credentials,
          provisionerId: opts.provisionerId,
          workerType: opts.workerType,
          capacity: Number(opts.capacity),
          workerGroup: opts.workerGroup,
          workerId: opts.workerId,
          workDir: opts.workDir,
          taskUser: opts.taskUser,
          isolation: opts.isolation as IsolationMode | undefined,
          network: (opts.network ?? (process.env.TGS_SHELL_WORKER_NETWORK || undefined)) as NetworkMode | undefined,
          uidRange: opts.uidRange,
          ...(opts.maxArtifactSize ? { maxArtifactBytes: parseSize('--max-artifact-size', opts.maxArtifactSize) } : {}),
          limits: {
            memoryBytes: parseSize('--max-memory', opts.maxMemory),
            processes: positive('--max-processes', opts.maxProcesses, true),
            cpus: positive('--cpus', opts.cpus, false),
            tmpBytes: parseSize('--max-tmp', opts.maxTmp),
            fileBytes: parseSize('--max-file-size', opts.maxFileSize),
            taskDirBytes: parseSize('--max-task-dir', opts.maxTaskDir),
          },
          transport: opts.claimWork ? 'claimWork' : 'stream',
          killGraceMs: seconds('--kill-grace', opts.killGrace),
          drainTimeoutMs: seconds('--drain-timeout', opts.drainTimeout),
          log: lineLogger(log),
        });
        onDrainSignals(() => worker.drain(), () => worker.stop());
        await worker.done;
      } finally {
        // A worker that cannot work (bad options or credentials) must not be kept alive by the metrics server.
        await metrics?.close();
      }
    });
}
