// The side panel of a selected node: what it is, how its runs went, its artifacts and log, and what can be done.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import type { GraphStore } from '../graph/store';
import { href } from '../router';
import { isResolved, STATE_NAMES } from '../states';
import { TaskActions } from './TaskActions';
import { RunSections, StateBadge, type TaskStatus } from './TaskDetails';
import { AmendBadge } from './AmendBadge';
import { AMEND_MARKS, SUPERSEDED } from '../graph/amendMarks';

const MAX_LINKS = 60;

function NodeLinks({ store, nodes, title }: { store: GraphStore; nodes: number[]; title: string }) {
  return (
    <div class={`links ${title}`}>
      <h3>
        {title} ({nodes.length})
      </h3>
      {nodes.length === 0 ? (
        <p class="muted">none</p>
      ) : (
        <ul>
          {nodes.slice(0, MAX_LINKS).map((i) => (
            <li key={i}>
              <button class="link" onClick={() => store.select(i, true)}>
                {store.label(i)}
              </button>{' '}
              <StateBadge state={STATE_NAMES[(store.data as NonNullable<GraphStore['data']>).states[i]]} />
            </li>
          ))}
          {nodes.length > MAX_LINKS && <li class="muted">… and {nodes.length - MAX_LINKS} more</li>}
        </ul>
      )}
    </div>
  );
}

export function TaskPanel({ store, idx, version }: { store: GraphStore; idx: number; version: number }) {
  const d = store.data as NonNullable<GraphStore['data']>;
  const taskId = store.taskId(idx);
  const state = STATE_NAMES[d.states[idx]];
  const member = d.members[idx] === 1;
  const mark = d.amend[idx] > 0 ? AMEND_MARKS[d.amend[idx]] : undefined;
  const runs = d.runs[idx];
  // Refetch details when the task's state or run count changes (the live feed says so).
  const refresh = `${state}/${runs}`;
  const [status, setStatus] = useState<TaskStatus>();
  const [rerunsLeft, setRerunsLeft] = useState<number>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    setError(undefined);
    apiGet<{ status: TaskStatus }>('queue', `/task/${taskId}/status`, abort.signal).then(
      (s) => setStatus(s.status),
      (err: unknown) => (err as Error).name !== 'AbortError' && setError(describeError(err)),
    );
    if (member) {
      apiGet<{ rerunsLeft: number }>('scheduler', `/task-graph/${store.taskGraphId}/inspect/${taskId}`, abort.signal).then(
        (t) => setRerunsLeft(t.rerunsLeft),
        () => setRerunsLeft(undefined),
      );
    }
    return () => abort.abort();
  }, [taskId, refresh]);
  void version;
  const live = state === 'running' || state === 'pending';
  const resolved = isResolved(d.states[idx]);
  return (
    <aside class="task-panel" aria-label="task details" data-task-id={taskId}>
      <div class="panel-head">
        <h2 class="task-label">{member ? store.label(idx) : d.amend[idx] === SUPERSEDED ? `(replaced) ${d.labels[idx]}`.trim() : '(external task)'}</h2>
        <button class="close" title="close" onClick={() => store.select(undefined, false)}>
          ×
        </button>
      </div>
      <dl class="facts">
        <dt>taskId</dt>
        <dd>
          <a href={href(`task/${taskId}`)} class="mono">
            {taskId}
          </a>
        </dd>
        <dt>state</dt>
        <dd class="task-state">
          <StateBadge state={state} />
        </dd>
        {mark && (
          <>
            <dt>amend</dt>
            <dd class="task-amend">
              <AmendBadge mark={mark} /> {mark.meaning}
            </dd>
          </>
        )}
        {member && (
          <>
            <dt>reruns left</dt>
            <dd class="reruns-left">{rerunsLeft ?? '…'}</dd>
          </>
        )}
        {status && (
          <>
            <dt>retries left</dt>
            <dd>{status.retriesLeft}</dd>
          </>
        )}
      </dl>
      {error && <p class="error">{error}</p>}
      {member && <TaskActions taskId={taskId} taskGraphId={store.taskGraphId} resolved={resolved} heading="h3" />}
      <RunSections taskId={taskId} status={status} live={live} refresh={refresh} heading="h3" />
      <NodeLinks store={store} nodes={store.requires(idx)} title="requires" />
      <NodeLinks store={store} nodes={store.dependents(idx)} title="dependents" />
    </aside>
  );
}
