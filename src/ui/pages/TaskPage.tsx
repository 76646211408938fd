// /ui/task/<taskId>: any task, in a graph or not: status, runs, log, artifacts, definition.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import { RunSections, StateBadge, type TaskStatus } from '../components/TaskDetails';
import { TaskActions } from '../components/TaskActions';
import { href } from '../router';

/** Links shown per list (requires, dependents), as the graph page's side panel. */
const MAX_LINKS = 60;

interface Inspected {
  label: string;
  requires: string[];
  dependents: string[];
  dependentCount?: number;
  rerunsLeft: number;
}

/** A graph task named by its label (or, for a task of another group, its taskId), linking to its task page. */
function LabelLink({ taskGraphId, name }: { taskGraphId: string; name: string }) {
  const [target, setTarget] = useState<{ taskId: string; state: string }>();
  useEffect(() => {
    const abort = new AbortController();
    apiGet<{ taskId: string; state: string }>('scheduler', `/task-graph/${taskGraphId}/inspect/${encodeURIComponent(name)}`, abort.signal).then(setTarget, () => undefined);
    return () => abort.abort();
  }, [taskGraphId, name]);
  return (
    <li data-label={name}>
      {target ? <a href={href(`task/${target.taskId}`)}>{name}</a> : <span>{name}</span>} {target && <StateBadge state={target.state} />}
    </li>
  );
}

function Links({ taskGraphId, names, total, title }: { taskGraphId: string; names: string[]; total: number; title: string }) {
  return (
    <div class={`links ${title}`}>
      <h2>
        {title} ({total})
      </h2>
      {names.length === 0 ? (
        <p class="muted">none</p>
      ) : (
        <ul>
          {names.slice(0, MAX_LINKS).map((n) => (
            <LabelLink key={n} taskGraphId={taskGraphId} name={n} />
          ))}
          {total > MAX_LINKS && <li class="muted">… and {total - MAX_LINKS} more</li>}
        </ul>
      )}
    </div>
  );
}

/** A task outside a graph: its dependencies from its definition, as taskIds. */
function PlainDependencies({ dependencies }: { dependencies: string[] }) {
  return (
    <div class="links requires">
      <h2>requires ({dependencies.length})</h2>
      {dependencies.length === 0 ? (
        <p class="muted">none</p>
      ) : (
        <ul>
          {dependencies.slice(0, MAX_LINKS).map((id) => (
            <li key={id}>
              <a href={href(`task/${id}`)} class="mono">
                {id}
              </a>
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

interface TaskDefinition {
  taskGroupId: string;
  schedulerId: string;
  provisionerId?: string;
  workerType?: string;
  taskQueueId?: string;
  metadata?: { name?: string; description?: string; owner?: string; source?: string };
  [key: string]: unknown;
}

export function TaskPage({ taskId }: { taskId: string }) {
  const [definition, setDefinition] = useState<TaskDefinition>();
  const [status, setStatus] = useState<TaskStatus>();
  const [inGraph, setInGraph] = useState(false);
  const [inspected, setInspected] = useState<Inspected>();
  // whether the inspect answer came (either way): until then the page does not know whether to show labels or taskIds
  const [inspectDone, setInspectDone] = useState(false);
  // bumped by an accepted action: the status is read again at once
  const [reload, setReload] = useState(0);
  const [error, setError] = useState<string>();
  useEffect(() => {
    apiGet<TaskDefinition>('queue', `/task/${taskId}`).then(
      (d) => {
        setDefinition(d);
        apiGet('scheduler', `/task-graph/${d.taskGroupId}/status`).then(
          () => setInGraph(true),
          () => setInGraph(false),
        );
        // its label, requires and dependents when it is a graph's task
        apiGet<Inspected>('scheduler', `/task-graph/${d.taskGroupId}/inspect/${taskId}`)
          .then(setInspected, () => setInspected(undefined))
          .finally(() => setInspectDone(true));
      },
      (err: unknown) => setError(describeError(err)),
    );
  }, [taskId]);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const s = (await apiGet<{ status: TaskStatus }>('queue', `/task/${taskId}/status`)).status;
        if (stopped) return;
        setStatus(s);
        // a resolved task changes only by a rerun: looked at less often
        timer = setTimeout(load, ['completed', 'failed', 'exception'].includes(s.state) ? 10_000 : 2000);
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [taskId, reload]);
  const refresh = status ? `${status.state}/${status.runs.length}` : '';
  // a graph's task: its inspect answer names it, whatever the status check says meanwhile
  const graphId = inspected ? definition?.taskGroupId : undefined;
  return (
    <div class="task-page">
      <h1>{definition?.metadata?.name ?? 'Task'}</h1>
      <p class="mono">{taskId}</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {definition && (
        <dl class="facts">
          <dt>state</dt>
          <dd class="task-state">{status ? <StateBadge state={status.state} /> : '…'}</dd>
          <dt>task group</dt>
          <dd>
            {inGraph ? <a href={href(`task-graph/${definition.taskGroupId}`)}>{definition.taskGroupId}</a> : <span class="mono">{definition.taskGroupId}</span>}
            {inGraph ? ' (task graph)' : ''}
          </dd>
          {inspected && (
            <>
              <dt>label</dt>
              <dd class="task-label">{inspected.label}</dd>
              <dt>reruns left</dt>
              <dd class="reruns-left">{inspected.rerunsLeft}</dd>
            </>
          )}
          <dt>worker pool</dt>
          <dd>{definition.taskQueueId ?? `${definition.provisionerId}/${definition.workerType}`}</dd>
          {status && (
            <>
              <dt>retries left</dt>
              <dd>{status.retriesLeft}</dd>
              <dt>deadline</dt>
              <dd>{status.deadline}</dd>
            </>
          )}
          {definition.metadata?.description && (
            <>
              <dt>description</dt>
              <dd>{definition.metadata.description}</dd>
            </>
          )}
        </dl>
      )}
      {status && definition && <TaskActions taskId={taskId} taskGraphId={graphId} resolved={['completed', 'failed', 'exception'].includes(status.state)} heading="h2" onDone={() => setReload((r) => r + 1)} />}
      <RunSections taskId={taskId} status={status} live={status?.state === 'running' || status?.state === 'pending'} refresh={refresh} heading="h2" />
      {graphId && inspected && (
        <section class="task-links">
          <Links taskGraphId={graphId} names={inspected.requires} total={inspected.requires.length} title="requires" />
          <Links taskGraphId={graphId} names={inspected.dependents} total={inspected.dependentCount ?? inspected.dependents.length} title="dependents" />
        </section>
      )}
      {definition && inspectDone && !inspected && Array.isArray(definition.dependencies) && (
        <section class="task-links">
          <PlainDependencies dependencies={definition.dependencies as string[]} />
        </section>
      )}
      {definition && (
        <section>
          <h2>Definition</h2>
          <pre class="definition">{JSON.stringify(definition, null, 2)}</pre>
        </section>
      )}
    </div>
  );
}
