// /ui/task/<taskId>: any task, in a graph or not: status, runs, log, artifacts, definition.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import { RunSections, StateBadge, type TaskStatus } from '../components/TaskDetails';
import { href } from '../router';

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
  const [error, setError] = useState<string>();
  useEffect(() => {
    apiGet<TaskDefinition>('queue', `/task/${taskId}`).then(
      (d) => {
        setDefinition(d);
        apiGet('scheduler', `/task-graph/${d.taskGroupId}/status`).then(
          () => setInGraph(true),
          () => setInGraph(false),
        );
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
        if (!['completed', 'failed', 'exception'].includes(s.state)) timer = setTimeout(load, 2000);
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [taskId]);
  const refresh = status ? `${status.state}/${status.runs.length}` : '';
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
      <RunSections taskId={taskId} status={status} live={status?.state === 'running' || status?.state === 'pending'} refresh={refresh} heading="h2" />
      {definition && (
        <section>
          <h2>Definition</h2>
          <pre class="definition">{JSON.stringify(definition, null, 2)}</pre>
        </section>
      )}
    </div>
  );
}
