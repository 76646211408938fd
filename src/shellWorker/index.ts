import { hostname } from 'node:os';
import { ApiClient, TgsApiError, type TgsCredentials } from '../client/http.js';
import { TgsClient } from '../client/tgsClient.js';
import { WorkerStream } from '../client/workerStream.js';
import { ReportBatcher } from './reports.js';
import { runTask, type ClaimedRun, type RunOutcome } from './runTask.js';
import { resolveTaskUser } from './taskUser.js';
import { chooseIsolation, probeBwrap, Sandbox, UNSAFE_LINE, type IsolationMode } from './sandbox.js';
import { DEFAULT_UID_RANGE, parseUidRange, uidPool, type UidRange } from './runUids.js';
import { MAX_KILL_GRACE } from './payload.js';
import { startApiRelay, type ApiRelay } from './apiRelay.js';
import { apiAddress, chooseNetwork, findNetworkTools, findTool, needsLowPort, probeUnshare, NETWORK_UNSAFE_LINE, sandboxHosts, type NetworkMode } from './network.js';
import { tmpdir } from 'node:os';
import { DEFAULT_LIMITS, fmtBytes, planCgroups, type RunLimits } from './limits.js';

export { parseShellPayload, shellPayloadSchema, type ShellPayload, type ArtifactSpec } from './payload.js';
export type { RunOutcome } from './runTask.js';
export { ISOLATION_MODES, UNSAFE_LINE, type IsolationMode } from './sandbox.js';
export { NETWORK_MODES, NETWORK_UNSAFE_LINE, type NetworkMode } from './network.js';
export { DEFAULT_LIMITS, parseSize, type RunLimits } from './limits.js';

export interface ShellWorkerOptions {
  /** where the API runs, e.g. http://127.0.0.1:8080 */
  rootUrl: string;
  /** needs queue:claim-work:<provisionerId>/<workerType> and queue:worker-id:<workerGroup>/<workerId> */
  credentials?: TgsCredentials;
  provisionerId: string;
  workerType: string;
  /** how many tasks run at once */
  capacity: number;
  /** default `tgs-shell` */
  workerGroup?: string;
  /** default `<hostname>-<pid>` (cut to 38 characters) */
  workerId?: string;
  /** parent directory of the per-task working directories (default: the OS temp dir) */
  workDir?: string;
  /**
   * How runs are kept apart from each other and from the worker (sandbox.ts): `bwrap`, `user` (root) or `none`
   * (unsafe). Default: the strongest this machine gives, bwrap if it works here, else `user` when root; with neither
   * the worker refuses to start unless `fallbackToNone`.
   */
  isolation?: IsolationMode;
  /** with no isolation asked for and none available: run unsandboxed (with the unsafe line) instead of refusing (tgs dev) */
  fallbackToNone?: boolean;
  /**
   * What runs reach over the network (network.ts): `api` (the default: the tgs API and nothing else), `none`,
   * `internet` (slirp4netns; never the host's loopback or private ranges) or `host` (unsafe, by name). A mode the
   * machine cannot give refuses to start, saying what to install.
   */
  network?: NetworkMode;
  /** with no network mode asked for and `api` not available: share the worker's network (with the unsafe line) instead of refusing (tgs dev) */
  fallbackToHostNetwork?: boolean;
  /**
   * The largest artifact file a run uploads (`--max-artifact-size`; default TGS_MAX_ARTIFACT_BYTES, else the API's
   * default of 64 MiB): a larger one is refused before it is read.
   */
  maxArtifactBytes?: number;
  /** what one run may use (limits.ts; DEFAULT_LIMITS for what is not given) */
  limits?: Partial<RunLimits>;
  /** per-run uids (modes user, and bwrap as root): `FIRST-LAST` or a range; default 1500000-1565535 */
  uidRange?: string | UidRange;
  /** the bwrap binary (default: `bwrap` on PATH) */
  bwrapPath?: string;
  /**
   * The OS user outside the sandbox (the worker must be root): with bwrap, every sandbox runs as this user instead of
   * a fresh uid per run; with `none`, every task runs as it. Not used with `user`, which gives each run its own uid.
   */
  taskUser?: string;
  /** how often the live log is re-uploaded while a task runs (default 1000 ms) */
  logIntervalMs?: number;
  /** the worker's own log lines (default: console.log with a `shell-worker:` prefix) */
  log?: (line: string) => void;
  /**
   * Send the reports of runs that end together in one reportResolutions call, signed with `credentials`
   * (default true). That client then needs `queue:resolve-task:<taskId>/<runId>` of the runs (in practice
   * `queue:resolve-task:*`); when it lacks them, or the server has no such endpoint, the first refused batch
   * switches the worker to one call per report, each signed with its run's credentials.
   */
  batchReports?: boolean;
  /**
   * How tasks come: `stream` (default), pushed over the worker stream (docs/api.md § The worker stream), the runs'
   * reports going back on it; `claimWork`, the Taskcluster long-poll. A server without the worker stream (404)
   * makes the worker claim with claimWork.
   */
  transport?: 'stream' | 'claimWork';
  /**
   * From SIGTERM to SIGKILL when a run is canceled (`--kill-grace`, default 10 s; a payload's `killGrace` overrides it).
   * Cancels reach the worker at once over the worker stream (its `canceled` frame); with claimWork they are found at
   * the next reclaim or report, as with Taskcluster's workers, and the command is killed then.
   */
  killGraceMs?: number;
  /** How long `drain` lets running tasks finish before reporting the rest worker-shutdown (`--drain-timeout`, default 5 min). */
  drainTimeoutMs?: number;
  /** called with each run's outcome (tests, `tgs dev`'s counters) */
  onRun?: (run: { taskId: string; runId: number; outcome: RunOutcome }) => void;
}

export interface ShellWorker {
  workerGroup: string;
  workerId: string;
  /**
   * Stops claiming, kills running commands and reports them exception worker-shutdown (the queue retries
   * them), then resolves. Safe to call more than once, also while draining (it ends the drain at once).
   */
  stop(): Promise<void>;
  /**
   * Stops claiming and lets running tasks finish for up to `drainTimeoutMs`, then does what `stop` does with the
   * rest; resolves once the worker has stopped (`tgs shell-worker` on SIGTERM). Safe to call more than once.
   */
  drain(): Promise<void>;
  /** Resolves once the worker has stopped; rejects if it cannot work at all (bad credentials, missing scopes). */
  done: Promise<void>;
}

const IDENTIFIER = /^[a-zA-Z0-9_-]{1,38}$/;

/** `--kill-grace`'s default: a canceled command's time between SIGTERM and SIGKILL. */
export const DEFAULT_KILL_GRACE_MS = 10_000;
/** `--drain-timeout`'s default; the Helm chart's terminationGracePeriodSeconds and docker-compose's stop_grace_period are a bit above it. */
export const DEFAULT_DRAIN_TIMEOUT_MS = 300_000;

const fmtS = (ms: number) => `${Math.round(ms / 100) / 10} s`;

function defaultWorkerId(): string {
  const host = hostname().replace(/[^a-zA-Z0-9_-]/g, '-') || 'host';
  const pid = `-${process.pid}`;
  return `${host.slice(0, 38 - pid.length)}${pid}`;
}

/** Claims tasks of one worker pool and runs them as shell commands (docs/api.md § The CLI, the shell worker and the client library). */
export function startShellWorker(options: ShellWorkerOptions): ShellWorker {
  const workerGroup = options.workerGroup ?? 'tgs-shell';
  const workerId = options.workerId ?? defaultWorkerId();
  for (const [flag, value] of [['provisioner-id', options.provisionerId], ['worker-type', options.workerType], ['worker-group', workerGroup], ['worker-id', workerId]]) {
    if (!IDENTIFIER.test(value)) throw new Error(`--${flag} ${JSON.stringify(value)}: use 1-38 characters of [a-zA-Z0-9_-]`);
  }
  if (!Number.isInteger(options.capacity) || options.capacity < 1 || options.capacity > 32) {
    throw new Error(`--capacity ${options.capacity}: give a whole number from 1 to 32`);
  }
  const killGraceMs = options.killGraceMs ?? DEFAULT_KILL_GRACE_MS;
  const drainTimeoutMs = options.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS;
  if (!(killGraceMs >= 0 && killGraceMs <= MAX_KILL_GRACE * 1000)) throw new Error(`--kill-grace ${killGraceMs / 1000}: give 0 to ${MAX_KILL_GRACE} seconds`);
  if (!(drainTimeoutMs >= 0 && drainTimeoutMs <= 2 ** 31 - 1)) throw new Error(`--drain-timeout ${drainTimeoutMs / 1000}: give 0 seconds or more (at most 24 days)`);
  const taskUser = options.taskUser === undefined ? undefined : resolveTaskUser(options.taskUser);
  const log = options.log ?? ((line: string) => console.log(`shell-worker: ${line}`));
  const uidRange = typeof options.uidRange === 'string' ? parseUidRange(options.uidRange) : (options.uidRange ?? DEFAULT_UID_RANGE);
  const root = process.getuid?.() === 0;
  // tried once, as the identity sandboxes will have: a root worker runs them as a uid of the range
  const bwrap = options.isolation === 'user' || options.isolation === 'none' ? { ok: false as const, why: 'not tried' } : probeBwrap({ bwrapPath: options.bwrapPath, as: root ? (taskUser ?? { uid: uidRange.last, gid: uidRange.last }) : undefined });
  const isolation = chooseIsolation(options.isolation, { uid: process.getuid?.(), bwrap }, { fallbackToNone: options.fallbackToNone });
  const tools = findNetworkTools();
  const unshareFails = isolation.mode !== 'bwrap' && root && options.network !== 'host' ? probeUnshare(tools) : undefined;
  const network = chooseNetwork(options.network, { isolation: isolation.mode, root, tools, unshareFails }, { fallbackToHost: options.fallbackToHostNetwork });
  const api = network.mode === 'host' ? undefined : apiAddress(options.rootUrl);
  if (isolation.mode === 'bwrap' && needsLowPort(api) && !tools.nsenter) {
    throw new Error(`--network ${network.mode}: the API's port ${api?.port} is below 1024, and letting a run's forwarder listen there needs nsenter, which is missing: apt-get install util-linux`);
  }
  const sandboxConfig = {
    mode: isolation.mode,
    bwrapPath: bwrap.ok ? bwrap.path : undefined,
    uids: isolation.mode === 'user' || (isolation.mode === 'bwrap' && root && !taskUser) ? uidPool(uidRange) : undefined,
    taskUser: isolation.mode === 'user' ? undefined : taskUser,
    workDir: options.workDir,
    network: network.mode,
    tools,
    api,
    limits: { ...DEFAULT_LIMITS, ...options.limits },
    prlimit: findTool('prlimit'),
  };
  // checked now (it throws a --work-dir that runs cannot enter); made again once the relay listens
  let sandbox = new Sandbox(sandboxConfig);
  let relay: ApiRelay | undefined;
  const maxArtifactBytes = options.maxArtifactBytes ?? (Number(process.env.TGS_MAX_ARTIFACT_BYTES) || 64 * 1024 * 1024);
  const pool = `${options.provisionerId}/${options.workerType}`;
  const claimAbort = new AbortController();
  /** no more claims: the worker drains or stops */
  const noClaims = new AbortController();
  /** running commands are killed and reported worker-shutdown */
  const shutdown = new AbortController();
  /** each running run's cancel (the worker stream's `canceled` frame), by `<taskId>/<runId>` */
  const cancels = new Map<string, AbortController>();
  const claimer = new ApiClient(options.rootUrl, options.credentials, claimAbort.signal);
  let reports = new ReportBatcher(
    options.credentials && options.batchReports !== false ? new TgsClient({ rootUrl: options.rootUrl, credentials: options.credentials }) : undefined,
    options.capacity,
    log,
  );
  const running = new Set<Promise<void>>();
  /** runs reported worker-shutdown so far */
  let handedBack = 0;
  let wake: (() => void) | undefined;
  let stream: WorkerStream | undefined;

  const start = (claim: ClaimedRun) => {
    const key = `${claim.status.taskId}/${claim.runId}`;
    const cancel = new AbortController();
    cancels.set(key, cancel);
    // a claim that arrives while the worker drains is handed back at once (worker-shutdown: the queue retries it now)
    const signal = noClaims.signal.aborted ? AbortSignal.abort() : shutdown.signal;
    const p = runTask(claim, { rootUrl: options.rootUrl, logIntervalMs: options.logIntervalMs ?? 1000, log, sandbox, reports, killGraceMs, maxArtifactBytes }, signal, cancel.signal)
      .then(
        (outcome) => {
          if (outcome === 'worker-shutdown') handedBack++;
          options.onRun?.({ taskId: claim.status.taskId, runId: claim.runId, outcome });
        },
        (err: unknown) => log(`${claim.status.taskId}/${claim.runId}: ${(err as Error).stack ?? String(err)}`),
      )
      .finally(() => {
        if (cancels.get(key) === cancel) cancels.delete(key);
        stream?.forget(claim.status.taskId, claim.runId);
        running.delete(p);
        wake?.();
        if (!shutdown.signal.aborted) stream?.release();
      });
    running.add(p);
  };

  const refused = (err: TgsApiError, call: string) =>
    new Error(`${call} for ${pool} was refused: ${err.message}\n` + `The worker's client (TGS_CLIENT_ID) needs queue:claim-work:${pool} and queue:worker-id:${workerGroup}/${workerId}.`);

  const claimed = (claim: ClaimedRun) => {
    log(`${claim.status.taskId}/${claim.runId}: claimed${claim.task.metadata?.name ? ` (${claim.task.metadata.name})` : ''}`);
    start(claim);
  };

  /** Runs what the worker stream pushes until the worker stops; false when the API has no worker stream (404). */
  const streamLoop = async (): Promise<boolean> => {
    const opened = new WorkerStream({
      rootUrl: options.rootUrl,
      credentials: options.credentials,
      provisionerId: options.provisionerId,
      workerType: options.workerType,
      workerGroup,
      workerId,
      capacity: options.capacity,
      // claims pushed while stopping still start: runTask reports them worker-shutdown at once
      onClaim: (claim) => claimed(claim as unknown as ClaimedRun),
      // a run resolved by someone else (a cancel, its deadline): SIGTERM now, nothing reported
      onCanceled: (run) => cancels.get(`${run.taskId}/${run.runId}`)?.abort(run.reasonResolved),
      log,
    });
    const stopped = new Promise<void>((resolve) => noClaims.signal.addEventListener('abort', () => resolve(), { once: true }));
    try {
      // an API that cannot be reached yet: the stream keeps trying (logged once) until it opens or the worker stops
      await Promise.race([opened.opened, stopped]);
    } catch (err) {
      if (!(err instanceof TgsApiError)) throw err;
      if (err.status === 404) {
        log(`the API at ${options.rootUrl} has no worker stream: claiming with claimWork`);
        return false;
      }
      throw refused(err, 'the worker stream');
    }
    stream = opened;
    // reports go back on the stream (authorized as the runs' claimant), those that end together in one frame
    reports = new ReportBatcher({ reportResolutions: (items) => opened.resolve(items) }, options.capacity, log);
    await stopped;
    opened.stopClaiming();
    while (running.size > 0) await Promise.all([...running]);
    await opened.close();
    return true;
  };

  const loop = async () => {
    let failures = 0;
    if (isolation.mode === 'none') log(UNSAFE_LINE);
    if (isolation.mode === 'user' && taskUser) {
      log(`--task-user ${taskUser.name} is not used: isolation user gives every run a fresh uid of its own (--uid-range); --task-user only names the identity of bwrap sandboxes and of --isolation none`);
    }
    if (network.mode === 'host') log(NETWORK_UNSAFE_LINE);
    if (api) relay = await startApiRelay(options.workDir ?? tmpdir(), api, sandboxHosts(api));
    const cgroups = await planCgroups();
    sandbox = new Sandbox({ ...sandboxConfig, relay, cgroups: cgroups.plan });
    const l = sandboxConfig.limits;
    log(
      `each run's bounds: memory ${fmtBytes(l.memoryBytes)}, ${l.processes} processes and threads, ${l.cpus} CPUs${cgroups.plan ? ` (${cgroups.why})` : ` NOT APPLIED: ${cgroups.why}`}; ` +
        `file size ${fmtBytes(l.fileBytes)}${sandboxConfig.prlimit ? '' : ' NOT APPLIED (prlimit is missing: apt-get install util-linux)'}; task directory ${fmtBytes(l.taskDirBytes)}` +
        `${isolation.mode === 'bwrap' ? `, /tmp and /var/tmp ${fmtBytes(l.tmpBytes)} each` : ''}`,
    );
    log(`isolation ${isolation.mode} (${isolation.why}): ${sandbox.describe()}`);
    const transport = options.transport ?? 'stream';
    log(`claiming tasks of ${pool} as ${workerGroup}/${workerId}, capacity ${options.capacity}, against ${options.rootUrl}${transport === 'stream' ? ' over the worker stream' : ''}`);
    if (transport === 'stream' && (await streamLoop())) return;
    while (!noClaims.signal.aborted) {
      if (running.size >= options.capacity) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      let claims: ClaimedRun[];
      try {
        const answer = await claimer.request<{ tasks: ClaimedRun[] }>('queue', 'POST', `/claim-work/${options.provisionerId}/${options.workerType}`, {
          workerGroup,
          workerId,
          tasks: options.capacity - running.size,
        });
        claims = answer.tasks;
        failures = 0;
      } catch (err) {
        if (noClaims.signal.aborted) break;
        if (err instanceof TgsApiError && (err.status === 401 || err.status === 403)) {
          noClaims.abort();
          shutdown.abort();
          while (running.size > 0) await Promise.all([...running]);
          throw refused(err, 'claimWork');
        }
        failures++;
        const delay = Math.min(30_000, 500 * 2 ** Math.min(failures, 6));
        log(`claimWork failed (${(err as Error).message}); retrying in ${(delay / 1000).toFixed(1)} s`);
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, delay);
          noClaims.signal.addEventListener('abort', () => {
            clearTimeout(t);
            resolve();
          }, { once: true });
        });
        continue;
      }
      // claims answered while stopping still start: runTask reports them worker-shutdown at once
      for (const claim of claims) claimed(claim);
    }
    while (running.size > 0) await Promise.all([...running]);
  };

  const done = loop().finally(() => relay?.close());
  let stopping: Promise<void> | undefined;
  let draining: Promise<void> | undefined;
  const stopClaiming = () => {
    noClaims.abort();
    claimAbort.abort();
    stream?.stopClaiming();
    wake?.();
  };
  const stop = () => {
    stopping ??= (async () => {
      log(`stopping: ${running.size} task(s) running will be reported worker-shutdown`);
      stopClaiming();
      shutdown.abort();
      await done.catch(() => undefined);
      log('stopped');
    })();
    return stopping;
  };
  const drain = () => {
    draining ??= (async () => {
      if (stopping) return stopping;
      const started = Date.now();
      const before = running.size;
      const handedBackBefore = handedBack;
      log(`draining: no more claims; ${before} task(s) running may finish within the drain timeout of ${fmtS(drainTimeoutMs)}, the rest are then reported worker-shutdown (stop again to end them now)`);
      stopClaiming();
      let timer: NodeJS.Timeout | undefined;
      const timedOut = await Promise.race([
        done.then(() => false, () => false),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), drainTimeoutMs))),
      ]);
      clearTimeout(timer);
      if (timedOut && !stopping) log(`drain timeout of ${fmtS(drainTimeoutMs)} reached: ${running.size} task(s) still running`);
      if (timedOut || stopping) await stop();
      log(`drained in ${fmtS(Date.now() - started)}: of ${before} task(s) running, ${handedBack - handedBackBefore} reported worker-shutdown (retried by the queue), the rest finished`);
    })();
    return draining;
  };
  return { workerGroup, workerId, done, stop, drain };
}
