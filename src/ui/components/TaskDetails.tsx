// Pieces shared by the graph page's side panel and the task page: runs, artifacts, the live log's tail.
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiGet, apiUrl, artifactPath, ApiError, describeError } from '../api';
import { STATE_COLORS, type StateName } from '../states';
import { LIVE_LOG } from '../../queue/liveLogName';
import type { RunOf } from '../../queue/run';
import { duration, timestamp } from './format';
import { runOutcome } from './runOutcome';
import { byteSize } from '../../byteSize';
import { TableHead } from './TableHead';
import { TaskWhy } from './Why';
import { href } from '../router';

export type Run = RunOf<string>;

export interface TaskStatus {
  taskId: string;
  state: string;
  retriesLeft: number;
  deadline: string;
  runs: Run[];
  taskGroupId: string;
}

export interface Artifact {
  name: string;
  storageType: string;
  contentType: string;
  expires: string;
}

const TAIL_LINES = 200;

export function StateBadge({ state }: { state: string }) {
  const color = STATE_COLORS[state as StateName] ?? '#5f6368';
  return (
    <span class="badge" data-state={state} style={{ background: color }}>
      {state}
    </span>
  );
}

/** A run's artifact path: `runs/<runId>/artifacts/<name>`, or the latest run's `artifacts/<name>`. */
const artifactRoute = (taskId: string, runId: number | undefined, name: string) =>
  `/task/${taskId}${runId === undefined ? '' : `/runs/${runId}`}/artifacts/${artifactPath(name)}`;

/** Outcomes read from resolved runs' logs, kept for the page's life: a resolved run's log does not change. */
const outcomes = new Map<string, string | null>();

/** How each resolved run's command ended, from its log (runOutcome.ts); re-renders as the answers come. */
function useRunOutcomes(taskId: string, runs: Run[]): Map<number, string> {
  const [, tick] = useState(0);
  useEffect(() => {
    const abort = new AbortController();
    for (const r of runs) {
      const key = `${taskId}/${r.runId}`;
      if (!r.resolved || r.cachedFrom || outcomes.has(key)) continue;
      outcomes.set(key, null);
      fetch(apiUrl('queue', artifactRoute(taskId, r.runId, LIVE_LOG)), { signal: abort.signal })
        .then(async (res) => (res.ok ? runOutcome(await res.text()) : undefined))
        .then(
          (outcome) => {
            if (outcome) outcomes.set(key, outcome);
            tick((t) => t + 1);
          },
          () => outcomes.delete(key),
        );
    }
    return () => abort.abort();
  }, [taskId, runs.map((r) => `${r.runId}:${r.resolved ?? ''}`).join(',')]);
  const found = new Map<number, string>();
  for (const r of runs) {
    const o = outcomes.get(`${taskId}/${r.runId}`);
    if (o) found.set(r.runId, o);
  }
  return found;
}

export function RunsTable({ taskId, runs, shown, onShow }: { taskId: string; runs: Run[]; shown?: number; onShow?: (runId: number) => void }) {
  const exits = useRunOutcomes(taskId, runs);
  if (!runs.length) return <p class="muted">No runs yet.</p>;
  return (
    <table class="runs">
      <TableHead columns={['run', 'state', 'reason', 'exit', 'worker', 'started', 'resolved', 'took', 'log']} />
      <tbody>
        {runs.map((r) => (
          <tr key={r.runId} data-run={r.runId} class={shown === r.runId ? 'shown' : ''}>
            <td>{r.runId}</td>
            <td>
              <StateBadge state={r.state} />
            </td>
            <td>
              {r.reasonCreated}
              {r.reasonResolved ? ` → ${r.reasonResolved}` : ''}
            </td>
            <td class="exit" title="how the command ended, from the run's log">
              {exits.get(r.runId) ?? ''}
            </td>
            <td>
              {r.cachedFrom ? (
                // a run reused from the cache (docs/formats.md § Cached tasks): no worker ran it, the source did the work
                <span class="cached" data-cached-from={r.cachedFrom.taskId}>
                  cached from{' '}
                  <a href={href(`task/${r.cachedFrom.taskId}`)} class="mono">
                    {r.cachedFrom.taskId}
                  </a>{' '}
                  run {r.cachedFrom.runId} ({r.cachedFrom.tier})
                </span>
              ) : r.workerId ? (
                `${r.workerGroup}/${r.workerId}`
              ) : (
                ''
              )}
            </td>
            <td title={r.scheduled ? `scheduled ${timestamp(r.scheduled)}` : ''}>{timestamp(r.started)}</td>
            <td>{timestamp(r.resolved)}</td>
            <td>{r.started ? duration((r.resolved ? Date.parse(r.resolved) : Date.now()) - Date.parse(r.started)) : ''}</td>
            <td>
              {onShow &&
                (shown === r.runId ? (
                  <span class="muted">shown</span>
                ) : (
                  <button class="link" name={`show-run-${r.runId}`} onClick={() => onShow(r.runId)}>
                    show
                  </button>
                ))}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** Where an artifact's bytes really are, and how many there are (undefined: not known yet). */
interface Stored {
  where: string;
  size?: number;
}

/**
 * Where the artifact lives: an `s3` artifact's bytes are in tgs's own Postgres (src/queue/artifacts.ts; Taskcluster
 * would use S3), their size from a HEAD of the signed URL the queue gives; a `reference` is a URL elsewhere; an
 * `error` artifact holds only its reason.
 */
async function locate(taskId: string, runId: number | undefined, a: Artifact, signal: AbortSignal): Promise<Stored> {
  if (a.storageType === 'error') return { where: 'error artifact (no bytes)' };
  const route = `/task/${taskId}${runId === undefined ? '' : `/runs/${runId}`}/artifact-content/${artifactPath(a.name)}`;
  let target: { storageType: string; url?: string; reason?: string; message?: string };
  try {
    target = await apiGet(`queue`, route, signal);
  } catch {
    return { where: a.storageType === 's3' ? "tgs's Postgres" : 'elsewhere' };
  }
  if (a.storageType === 'reference') return { where: `reference to ${target.url ?? '?'}` };
  const res = await fetch(target.url as string, { method: 'HEAD', signal, cache: 'no-store' }).catch(() => undefined);
  const length = res?.ok ? res.headers.get('content-length') : null;
  return { where: res?.status === 404 ? "tgs's Postgres (not uploaded yet)" : "tgs's Postgres", size: length === null ? undefined : Number(length) };
}

/** A run's artifacts (the latest run's when `runId` is undefined); `refresh` changes when the run may have new ones. */
export function Artifacts({ taskId, runId, refresh }: { taskId: string; runId?: number; refresh: string }) {
  const [artifacts, setArtifacts] = useState<Artifact[]>();
  const [stored, setStored] = useState<Record<string, Stored>>({});
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    apiGet<{ artifacts: Artifact[] }>('queue', `/task/${taskId}${runId === undefined ? '' : `/runs/${runId}`}/artifacts`, abort.signal).then(
      (a) => {
        setArtifacts(a.artifacts);
        setError(undefined);
        for (const artifact of a.artifacts) {
          locate(taskId, runId, artifact, abort.signal).then(
            (where) => setStored((s) => ({ ...s, [artifact.name]: where })),
            () => undefined,
          );
        }
      },
      (err: unknown) => {
        if ((err as Error).name === 'AbortError') return;
        setArtifacts([]);
        // A task without runs has no artifacts: not worth an error.
        setError(err instanceof ApiError && err.status === 404 ? undefined : describeError(err));
      },
    );
    return () => abort.abort();
  }, [taskId, runId, refresh]);
  if (error) return <p class="error">{error}</p>;
  if (!artifacts) return <p class="muted">Loading artifacts…</p>;
  if (!artifacts.length) return <p class="muted">No artifacts.</p>;
  return (
    <ul class="artifacts">
      {artifacts.map((a) => {
        const where = stored[a.name];
        return (
          <li key={a.name} data-artifact={a.name}>
            <a href={apiUrl('queue', artifactRoute(taskId, runId, a.name))} target="_blank" rel="noreferrer">
              {a.name}
            </a>{' '}
            <span class="muted stored">
              {a.storageType}
              {where ? ` · ${where.where}` : ''}
              {where?.size !== undefined ? ` · ${byteSize(where.size)}` : ''} · {a.contentType}
            </span>
          </li>
        );
      })}
    </ul>
  );
}

/**
 * The last lines of public/logs/live.log of a run (the latest when `runId` is undefined); while `live` it looks again every 1.5 s (the worker
 * re-uploads the whole log every second or two while the task runs).
 */
export function LogTail({ taskId, runId, live, refresh }: { taskId: string; runId?: number; live: boolean; refresh: string }) {
  const [text, setText] = useState<string>();
  const [note, setNote] = useState<string>('Loading the log…');
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const abort = new AbortController();
    const load = async () => {
      try {
        const res = await fetch(apiUrl('queue', artifactRoute(taskId, runId, LIVE_LOG)), { signal: abort.signal, cache: 'no-store' });
        if (res.ok) {
          const body = await res.text();
          const lines = body.split('\n');
          const tail = lines.slice(-TAIL_LINES - 1).join('\n');
          setText(tail);
          setNote(lines.length > TAIL_LINES + 1 ? `last ${TAIL_LINES} of ${lines.length - 1} lines` : '');
        } else if (res.status === 404 || res.status === 424) {
          setText(undefined);
          setNote(live ? 'No log yet: waiting for the worker to upload it…' : 'This run has no log.');
        } else {
          setNote(`Cannot read the log: HTTP ${res.status}`);
        }
      } catch (err) {
        if ((err as Error).name !== 'AbortError') setNote(`Cannot read the log: ${(err as Error).message}`);
      }
      if (live && !stopped) timer = setTimeout(load, 1500);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
      abort.abort();
    };
  }, [taskId, runId, live, refresh]);
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text]);
  return (
    <div class="log">
      <div class="log-head">
        <a href={apiUrl('queue', artifactRoute(taskId, runId, LIVE_LOG))} target="_blank" rel="noreferrer">
          {LIVE_LOG}
        </a>{' '}
        {runId !== undefined && <span class="log-run">run {runId}</span>}
        <span class="muted">{note}</span>
        {live && <span class="live-dot" title="following" />}
      </div>
      {text !== undefined && (
        <pre class="log-tail" ref={pre}>
          {text}
        </pre>
      )}
    </div>
  );
}

/**
 * A task's runs, log tail and artifacts, as the graph page's side panel (`h3` headings) and the task page (`h2`)
 * show them. `live`: the task is pending or running, so the log is looked at again while it grows. Any run's log and
 * artifacts can be shown (`show` in its row); the latest run's by default.
 */
export function RunSections(props: { taskId: string; status?: TaskStatus; live: boolean; refresh: string; heading: 'h2' | 'h3' }) {
  const { taskId, status, live, refresh, heading: Heading } = props;
  const waiting = status?.state === 'unscheduled' || status?.state === 'pending';
  const [chosen, setChosen] = useState<number>();
  useEffect(() => setChosen(undefined), [taskId]);
  const runs = status?.runs ?? [];
  const latest = runs.length ? runs[runs.length - 1].runId : undefined;
  // a run chosen by hand stays shown; a new run resets the choice only when the latest was shown
  const shown = chosen !== undefined && chosen !== latest ? chosen : latest;
  return (
    <>
      {waiting && <TaskWhy taskId={taskId} refresh={refresh} heading={Heading} />}
      <section>
        <Heading>Runs</Heading>
        {status ? <RunsTable taskId={taskId} runs={runs} shown={runs.length > 1 ? shown : undefined} onShow={runs.length > 1 ? setChosen : undefined} /> : <p class="muted">Loading…</p>}
      </section>
      <section>
        <Heading>Log</Heading>
        <LogTail taskId={taskId} runId={shown} live={live && shown === latest} refresh={refresh} />
      </section>
      <section>
        <Heading>Artifacts{shown !== undefined && runs.length > 1 ? ` of run ${shown}` : ''}</Heading>
        <Artifacts taskId={taskId} runId={shown} refresh={refresh} />
      </section>
    </>
  );
}
