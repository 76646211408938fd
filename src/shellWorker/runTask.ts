import { ApiClient, TgsApiError, type TgsCredentials } from '../client/http.js';
import type { Resolution } from '../client/tgsClient.js';
import { ArtifactUploader } from './artifacts.js';
import { locateConfined, openConfined, type ArtifactRules } from './confine.js';
import { LIVE_LOG } from '../queue/liveLogName.js';
import { LiveLog } from './liveLog.js';
import { guessContentType, parseShellPayload, type ArtifactSpec, type ShellPayload } from './payload.js';
import type { RunSandbox, Sandbox } from './sandbox.js';
import { taskEnv } from './taskEnv.js';
import { narrowNetwork } from './network.js';
import type { ReportBatcher } from './reports.js';

const LOG_CONTENT_TYPE = 'text/plain; charset=utf-8';

/** One entry of claimWork's answer (Taskcluster's shape). */
export interface ClaimedRun {
  status: { taskId: string };
  runId: number;
  workerGroup: string;
  workerId: string;
  takenUntil: string;
  task: { payload: unknown; expires: string; deadline: string; metadata?: { name?: string } };
  credentials: TgsCredentials;
}

export interface RunOptions {
  rootUrl: string;
  /** how often the live log is re-uploaded while the command runs */
  logIntervalMs: number;
  log: (line: string) => void;
  /** makes each run's directory, identity and process tree, and ends them (sandbox.ts) */
  sandbox: Sandbox;
  /** where the run's report goes out (with other runs' reports, or as its single call) */
  reports: ReportBatcher;
  /** the largest artifact file uploaded; a larger one is refused before a byte of it is read */
  maxArtifactBytes: number;
  /** from SIGTERM to SIGKILL when the run is canceled (`--kill-grace`), unless its payload's killGrace says otherwise */
  killGraceMs: number;
}

export type RunOutcome = 'completed' | 'failed' | 'malformed-payload' | 'worker-shutdown' | 'claim-lost' | 'canceled';

const fmtSeconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Runs one claimed task to its end and reports it: completed (exit 0), failed (other exit, maxRunTime,
 * a declared artifact missing), exception malformed-payload, or, when `shutdown` aborts, worker-shutdown.
 * The live log is re-uploaded every `logIntervalMs` while the command runs, and once more before the report.
 * When `canceled` aborts (the worker stream's `canceled` frame; its reason is the run's reasonResolved), the run is
 * resolved already: the command gets SIGTERM at once and SIGKILL after the grace, and nothing is reported.
 */
export async function runTask(claim: ClaimedRun, options: RunOptions, shutdown: AbortSignal, canceled?: AbortSignal): Promise<RunOutcome> {
  const taskId = claim.status.taskId;
  const runId = claim.runId;
  const id = `${taskId}/${runId}`;
  let api = new ApiClient(options.rootUrl, claim.credentials);
  let takenUntil = Date.parse(claim.takenUntil);
  const uploader = new ArtifactUploader(() => api, taskId, runId);
  const liveLog = new LiveLog();
  const expires = claim.task.expires;

  let uploadedVersion = -1;
  let uploading: Promise<void> | undefined;
  const uploadLog = async (): Promise<void> => {
    // one upload at a time; a caller that needs the newest bytes waits for the one in flight first
    while (uploading) await uploading;
    if (liveLog.version === uploadedVersion) return;
    const version = liveLog.version;
    uploading = uploader.upload(LIVE_LOG, liveLog.bytes(), LOG_CONTENT_TYPE, expires).then(
      () => {
        uploadedVersion = version;
      },
      (err: unknown) => options.log(`${id}: live log upload failed (retrying): ${(err as Error).message}`),
    );
    try {
      await uploading;
    } finally {
      uploading = undefined;
    }
  };

  const report = async (outcome: 'completed' | 'failed' | 'exception', reason?: string): Promise<void> => {
    const path = `/task/${taskId}/runs/${runId}/${outcome}`;
    for (let attempt = 1; ; attempt++) {
      try {
        await options.reports.report(
          { taskId, runId, outcome, ...(reason ? { reason: reason as Resolution['reason'] } : {}) },
          () => api.request('queue', 'POST', path, reason ? { reason } : undefined),
        );
        return;
      } catch (err) {
        // 409: the run is no longer ours (canceled, claim expired): nothing left to report
        if (err instanceof TgsApiError && err.status >= 400 && err.status < 500) {
          options.log(`${id}: report ${outcome} refused: ${err.message}`);
          return;
        }
        if (attempt >= 5) throw err;
        await new Promise((r) => setTimeout(r, 500 * attempt));
      }
    }
  };

  liveLog.note(`task ${taskId} run ${runId} on ${claim.workerGroup}/${claim.workerId}${claim.task.metadata?.name ? ` (${claim.task.metadata.name})` : ''}`);
  const parsed = parseShellPayload(claim.task.payload);
  if ('error' in parsed) {
    liveLog.append(`${parsed.error}\n`);
    liveLog.note('resolving the run as exception malformed-payload (it will not be retried)');
    await uploadLog();
    await report('exception', 'malformed-payload');
    options.log(`${id}: malformed payload`);
    return 'malformed-payload';
  }
  const payload = parsed.payload;
  const canceledLine = () => `the run was resolved exception ${String(canceled?.reason ?? 'canceled')} by the queue (not by this worker)`;
  if (canceled?.aborted) {
    liveLog.note(`${canceledLine()} before its command started: nothing ran`);
    await uploadLog();
    options.log(`${id}: canceled (${String(canceled.reason)}) before it started`);
    return 'canceled';
  }
  if (shutdown.aborted) {
    liveLog.note('the worker is shutting down: resolving the run as exception worker-shutdown (the queue retries it)');
    await uploadLog();
    await report('exception', 'worker-shutdown');
    return 'worker-shutdown';
  }

  const network = narrowNetwork(options.sandbox.config.network, payload.network);
  if ('error' in network) {
    liveLog.append(`${network.error}\n`);
    liveLog.note('resolving the run as exception malformed-payload (it will not be retried)');
    await uploadLog();
    await report('exception', 'malformed-payload');
    options.log(`${id}: malformed payload (network)`);
    return 'malformed-payload';
  }
  let run: RunSandbox;
  try {
    run = await options.sandbox.prepare(taskId, runId, network.mode);
  } catch (err) {
    // the machine's fault (no free uid, a full disk), not the task's: the queue retries it elsewhere
    liveLog.note(`could not prepare the run's sandbox: ${(err as Error).message}; resolving the run as exception worker-shutdown`);
    options.log(`${id}: could not prepare the sandbox: ${(err as Error).message}`);
    await uploadLog();
    await report('exception', 'worker-shutdown');
    return 'worker-shutdown';
  }
  // artifact paths must resolve below this, whatever the task does to its directory
  const realWorkDir = run.dir;
  const [file, args, shell] = typeof payload.command === 'string' ? ['/bin/sh', ['-c', payload.command], true] : [payload.command[0], payload.command.slice(1), false];
  liveLog.note(`working directory ${run.dir}; ${run.describe}`);
  liveLog.note(`command ${shell ? `(sh -c) ${payload.command as string}` : JSON.stringify(payload.command)}; maxRunTime ${payload.maxRunTime} s`);
  const started = Date.now();
  let outcome: RunOutcome | undefined;
  let exitDescription = '';
  const env = taskEnv({ taskId, runId, rootUrl: options.rootUrl, dir: run.dir, tmpDir: run.tmpDir, userName: run.userName, payloadEnv: payload.env });
  const child = run.spawn(file, args, env, (line) => liveLog.note(line));
  // 'close' may come before the wait below is set up (a command that ends at once)
  const closed = new Promise((r) => child.once('close', r));
  child.stdout?.on('data', (d: Buffer) => liveLog.append(d));
  child.stderr?.on('data', (d: Buffer) => liveLog.append(d));

  const finished = new Promise<void>((resolve) => {
    child.once('error', (err) => {
      exitDescription = `could not start ${JSON.stringify(file)}: ${err.message}`;
      outcome ??= 'failed';
      resolve();
    });
    child.once('exit', (code, signal) => {
      exitDescription = signal ? `killed by ${signal}` : `exit code ${code}`;
      outcome ??= code === 0 ? 'completed' : 'failed';
      // the command is gone: so is what it left (end() below makes sure), and with it whatever holds its pipes open
      run.kill();
      resolve();
    });
  });
  const stop = (why: RunOutcome, line: string) => {
    if (outcome) return;
    outcome = why;
    liveLog.note(line);
    run.kill();
  };
  const maxRunTimer = setTimeout(
    () => stop('failed', `maxRunTime of ${payload.maxRunTime} s exceeded: killed the command`),
    payload.maxRunTime * 1000,
  );
  let graceTimer: NodeJS.Timeout | undefined;
  const onCancel = () => {
    if (outcome) return;
    outcome = 'canceled';
    // no reclaim: the run is not this worker's any more
    settled = true;
    const graceS = payload.killGrace ?? options.killGraceMs / 1000;
    liveLog.note(`${canceledLine()}: SIGTERM to the command, SIGKILL in ${graceS} s if it is still running`);
    options.log(`${id}: canceled (${String(canceled?.reason)}): SIGTERM, SIGKILL in ${graceS} s`);
    run.terminate();
    graceTimer = setTimeout(() => {
      liveLog.note(`still running ${graceS} s after SIGTERM: SIGKILL`);
      run.kill();
    }, graceS * 1000);
  };
  const onShutdown = () => {
    // a canceled command in its grace: the worker is going, so is the command
    if (outcome === 'canceled') return run.kill();
    stop('worker-shutdown', 'the worker is shutting down: killed the command; resolving the run as exception worker-shutdown (the queue retries it)');
  };
  shutdown.addEventListener('abort', onShutdown);
  if (shutdown.aborted) onShutdown();
  const logTimer = setInterval(() => void uploadLog(), options.logIntervalMs);

  // Reclaim well before takenUntil: when a third of the claim is left (1200 s claims: every 800 s). Until the report:
  // ending the run's processes, uploading its artifacts and removing its directory take claim time too.
  let settled = false;
  let reclaimTimer: NodeJS.Timeout | undefined;
  const scheduleReclaim = () => {
    reclaimTimer = setTimeout(reclaim, Math.max(500, ((takenUntil - Date.now()) * 2) / 3));
  };
  const reclaim = async () => {
    if (settled) return;
    try {
      const r = await api.request<{ takenUntil: string; credentials: TgsCredentials }>('queue', 'POST', `/task/${taskId}/runs/${runId}/reclaim`);
      api = new ApiClient(options.rootUrl, r.credentials);
      takenUntil = Date.parse(r.takenUntil);
    } catch (err) {
      if (err instanceof TgsApiError && err.status >= 400 && err.status < 500) {
        stop('claim-lost', `reclaim refused (${err.code}: ${err.message}): the run is no longer this worker's; killed the command`);
        return;
      }
      options.log(`${id}: reclaim failed, retrying: ${(err as Error).message}`);
      if (Date.now() > takenUntil) {
        stop('claim-lost', 'the claim expired before it could be renewed: killed the command');
        return;
      }
    }
    if (!settled) scheduleReclaim();
  };
  scheduleReclaim();
  canceled?.addEventListener('abort', onCancel);
  // canceled while its sandbox was made: the command started meanwhile, and stops now
  if (canceled?.aborted) onCancel();

  await finished;
  clearTimeout(maxRunTimer);
  clearTimeout(graceTimer);
  clearInterval(logTimer);
  shutdown.removeEventListener('abort', onShutdown);
  canceled?.removeEventListener('abort', onCancel);
  // output still buffered in the pipes arrives before 'close'; do not wait for stragglers that keep them open
  let closeTimer: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise((r) => (closeTimer = setTimeout(r, 1000)))]);
  clearTimeout(closeTimer);
  liveLog.note(`${exitDescription} after ${fmtSeconds(Date.now() - started)}${/^(killed by SIGXFSZ|exit code 153)$/.test(exitDescription) ? ' (SIGXFSZ, 128 + 25 for a shell): a file reached the file size bound (--max-file-size)' : ''}`);
  const bounds = await run.bounds().catch(() => []);
  for (const line of bounds) liveLog.note(line);
  // the kernel killed or refused part of the run: whatever its command said, its result is not to be trusted
  if (bounds.length > 0 && outcome === 'completed') {
    liveLog.note('the command exited 0, but the run reached a bound: it fails');
    outcome = 'failed';
  }
  // the command is gone: whatever it started goes too, before its files are read (nothing of the run can change
  // them during the upload) and before its directory is removed (nothing can swap a symlink in meanwhile)
  let ended = true;
  await run.end().catch((err: unknown) => {
    ended = false;
    liveLog.note(`could not end every process of the run: ${(err as Error).message}`);
    options.log(`${id}: could not end every process of the run: ${(err as Error).message}`);
  });

  let result = outcome as RunOutcome;
  if (result === 'completed' || result === 'failed') {
    const uploaded = await uploadArtifacts(payload, realWorkDir, { uid: run.uid, maxBytes: options.maxArtifactBytes }, uploader, liveLog, expires);
    if (uploaded === 'outside') result = 'malformed-payload';
    else if (uploaded === 'failed' && result === 'completed') {
      liveLog.note('a declared artifact could not be uploaded: the run fails');
      result = 'failed';
    }
  }
  if (ended) await run.remove().catch((err: unknown) => options.log(`${id}: could not remove ${run.dir}: ${(err as Error).message}`));
  else options.log(`${id}: left ${run.dir} in place: processes of the run are still alive`);
  settled = true;
  clearTimeout(reclaimTimer);
  if (result === 'claim-lost' || result === 'canceled') {
    // resolved by the queue already: the log still goes up (Taskcluster takes artifacts of a run resolved exception
    // for a while), the report would be refused
    await uploadLog();
    if (result === 'canceled') options.log(`${id}: canceled (${exitDescription})`);
    return result;
  }
  const exception = result === 'worker-shutdown' || result === 'malformed-payload';
  liveLog.note(exception ? `resolved: exception ${result}` : `resolved: ${result}`);
  await uploadLog();
  if (exception) await report('exception', result);
  else await report(result as 'completed' | 'failed');
  options.log(`${id}: ${result} (${exitDescription})`);
  return result;
}

/**
 * Uploads `payload.artifacts`; a missing or unreadable file becomes an error artifact (`failed`). A path leading out
 * of the task's directory (a symlink) uploads nothing at all and answers `outside`: the payload is malformed.
 */
async function uploadArtifacts(payload: ShellPayload, realWorkDir: string, rules: ArtifactRules, uploader: ArtifactUploader, liveLog: LiveLog, taskExpires: string): Promise<'ok' | 'failed' | 'outside'> {
  const outside = (a: ArtifactSpec, target: string) => {
    liveLog.note(`artifact ${a.name}: path ${JSON.stringify(a.path)} leads out of the task's directory (to ${target}): malformed payload`);
    return 'outside' as const;
  };
  // every path first, so a payload with one bad path uploads nothing
  for (const a of payload.artifacts) {
    const where = await locateConfined(realWorkDir, a.path).catch(() => undefined);
    if (where?.kind === 'outside') return outside(a, where.target);
  }
  let ok = true;
  for (const a of payload.artifacts) {
    const expires = a.expires ?? taskExpires;
    try {
      const read = await openConfined(realWorkDir, a.path, rules);
      if (read.kind === 'outside') return outside(a, read.target);
      if (read.kind !== 'file') {
        const [reason, message] =
          read.kind === 'not-a-file' ? (['invalid-resource-on-worker', `${a.path} is not a regular file`] as const)
          : read.kind === 'not-the-runs' ? (['invalid-resource-on-worker', `${a.path} is not the run's own file: ${read.why}; nothing was read`] as const)
          : read.kind === 'too-large' ? (['too-large-file-on-worker', `${a.path} holds ${read.size} bytes, more than this worker uploads (--max-artifact-size ${rules.maxBytes}); nothing was read`] as const)
          : (['file-missing-on-worker', `${a.path} does not exist in the working directory after the command`] as const);
        liveLog.note(`artifact ${a.name}: ${message}`);
        await uploader.error(a.name, reason, message, expires);
        ok = false;
        continue;
      }
      try {
        await uploader.upload(a.name, { handle: read.handle, size: read.size }, a.contentType ?? guessContentType(a.path), expires);
      } finally {
        await read.handle.close();
      }
      liveLog.note(`artifact ${a.name}: uploaded ${a.path} (${read.size} bytes)`);
    } catch (err) {
      liveLog.note(`artifact ${a.name}: upload failed: ${(err as Error).message}`);
      ok = false;
    }
  }
  return ok ? 'ok' : 'failed';
}
