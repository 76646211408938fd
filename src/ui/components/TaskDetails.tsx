// Pieces shared by the graph page's side panel and the task page: runs, artifacts, the live log's tail.
import { useEffect, useRef, useState } from 'preact/hooks';
import { apiGet, apiUrl, artifactPath, ApiError, describeError } from '../api';
import { STATE_COLORS, type StateName } from '../states';
import { LIVE_LOG } from '../../queue/liveLogName';
import type { RunOf } from '../../queue/run';
import { duration, timestamp } from './format';
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

export function RunsTable({ runs }: { runs: Run[] }) {
  if (!runs.length) return <p class="muted">No runs yet.</p>;
  return (
    <table class="runs">
      <TableHead columns={['run', 'state', 'reason', 'worker', 'started', 'resolved', 'took']} />
      <tbody>
        {runs.map((r) => (
          <tr key={r.runId} data-run={r.runId}>
            <td>{r.runId}</td>
            <td>
              <StateBadge state={r.state} />
            </td>
            <td>
              {r.reasonCreated}
              {r.reasonResolved ? ` → ${r.reasonResolved}` : ''}
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
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** The latest run's artifacts; `refresh` changes when the run may have new ones. */
export function Artifacts({ taskId, refresh }: { taskId: string; refresh: string }) {
  const [artifacts, setArtifacts] = useState<Artifact[]>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    apiGet<{ artifacts: Artifact[] }>('queue', `/task/${taskId}/artifacts`, abort.signal).then(
      (a) => {
        setArtifacts(a.artifacts);
        setError(undefined);
      },
      (err: unknown) => {
        if ((err as Error).name === 'AbortError') return;
        setArtifacts([]);
        // A task without runs has no artifacts: not worth an error.
        setError(err instanceof ApiError && err.status === 404 ? undefined : describeError(err));
      },
    );
    return () => abort.abort();
  }, [taskId, refresh]);
  if (error) return <p class="error">{error}</p>;
  if (!artifacts) return <p class="muted">Loading artifacts…</p>;
  if (!artifacts.length) return <p class="muted">No artifacts.</p>;
  return (
    <ul class="artifacts">
      {artifacts.map((a) => (
        <li key={a.name}>
          <a href={apiUrl('queue', `/task/${taskId}/artifacts/${artifactPath(a.name)}`)} target="_blank" rel="noreferrer">
            {a.name}
          </a>{' '}
          <span class="muted">
            {a.storageType}, {a.contentType}
          </span>
        </li>
      ))}
    </ul>
  );
}

/**
 * The last lines of public/logs/live.log of the latest run; while `live` it looks again every 1.5 s (the worker
 * re-uploads the whole log every second or two while the task runs).
 */
export function LogTail({ taskId, live, refresh }: { taskId: string; live: boolean; refresh: string }) {
  const [text, setText] = useState<string>();
  const [note, setNote] = useState<string>('Loading the log…');
  const pre = useRef<HTMLPreElement>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const abort = new AbortController();
    const load = async () => {
      try {
        const res = await fetch(apiUrl('queue', `/task/${taskId}/artifacts/${artifactPath(LIVE_LOG)}`), { signal: abort.signal, cache: 'no-store' });
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
  }, [taskId, live, refresh]);
  useEffect(() => {
    if (pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [text]);
  return (
    <div class="log">
      <div class="log-head">
        <a href={apiUrl('queue', `/task/${taskId}/artifacts/${artifactPath(LIVE_LOG)}`)} target="_blank" rel="noreferrer">
          {LIVE_LOG}
        </a>{' '}
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
 * show them. `live`: the task is pending or running, so the log is looked at again while it grows.
 */
export function RunSections(props: { taskId: string; status?: TaskStatus; live: boolean; refresh: string; heading: 'h2' | 'h3' }) {
  const { taskId, status, live, refresh, heading: Heading } = props;
  const waiting = status?.state === 'unscheduled' || status?.state === 'pending';
  return (
    <>
      {waiting && <TaskWhy taskId={taskId} refresh={refresh} heading={Heading} />}
      <section>
        <Heading>Runs</Heading>
        {status ? <RunsTable runs={status.runs} /> : <p class="muted">Loading…</p>}
      </section>
      <section>
        <Heading>Log</Heading>
        <LogTail taskId={taskId} live={live} refresh={refresh} />
      </section>
      <section>
        <Heading>Artifacts</Heading>
        <Artifacts taskId={taskId} refresh={refresh} />
      </section>
    </>
  );
}
