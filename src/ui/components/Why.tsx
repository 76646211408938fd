// "Why isn't it running?": a task's blockers and a graph's root causes (docs/formats.md § Explanations), each with
// the action that clears it; a rerun the signed-in user may take is a button.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import { ActionResult, useAction, useActionsEnabled } from './Actions';

interface Blocker {
  kind: string;
  action: string;
  dependencies?: { taskId: string; label?: string; state: string }[];
  taskQueueId?: string;
  position?: { ahead: number; aheadAtHigherPriority: number };
  etaSeconds?: number | null;
}

interface RootCause {
  kind: string;
  taskId?: string;
  label?: string;
  taskQueueId?: string;
  count: number;
  action: string;
}

type Action = ReturnType<typeof useAction>;

/**
 * A rerun of this graph task, signed with the tab's credentials. Its outcome shows beside it, or where `shared`
 * shows it: the graph page keeps its banner's reruns' outcome in the header, since the banner goes away as soon as
 * the rerun unblocks the graph.
 */
function RerunButton({ taskGraphId, label, shared }: { taskGraphId: string; label: string; shared?: Action }) {
  const own = useAction();
  const action = shared ?? own;
  const signedIn = useActionsEnabled();
  return (
    <>
      <button
        name="why-rerun"
        disabled={action.busy || !signedIn.enabled}
        title={signedIn.title}
        onClick={() =>
          void action.run({
            service: 'scheduler',
            method: 'POST',
            path: `/task-graph/${taskGraphId}/rerun/${encodeURIComponent(label)}`,
            body: {},
            done: () => `Rerun of ${label} accepted: a new run is scheduled.`,
          })
        }
      >
        Rerun {label}
      </button>
      {!shared && <ActionResult result={action.result} />}
    </>
  );
}

/** Loads `path` (a GET) again whenever `refresh` changes. */
function useExplanation<T>(service: 'queue' | 'scheduler', path: string, refresh: string, enabled: boolean) {
  const [answer, setAnswer] = useState<T>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    if (!enabled) return;
    const abort = new AbortController();
    apiGet<T>(service, path, abort.signal).then(
      (a) => {
        setAnswer(a);
        setError(undefined);
      },
      (err: unknown) => (err as Error).name !== 'AbortError' && setError(describeError(err)),
    );
    return () => abort.abort();
  }, [path, refresh, enabled]);
  return { answer, error };
}

/** Why a task has not run (yet): shown while it is unscheduled or pending. */
export function TaskWhy({ taskId, refresh, heading: Heading }: { taskId: string; refresh: string; heading: 'h2' | 'h3' }) {
  const { answer, error } = useExplanation<{ summary: string; blockers: Blocker[]; taskGraphId?: string }>('queue', `/task/${taskId}/explain`, refresh, true);
  if (error) return <p class="error">{error}</p>;
  if (!answer || answer.blockers.length === 0) return null;
  return (
    <section class="why">
      <Heading>Why it is not running</Heading>
      <p class="why-summary">{answer.summary}</p>
      <ul class="blockers">
        {answer.blockers.map((b, k) => (
          <li key={k} data-kind={b.kind}>
            <b>{b.kind}</b>
            {b.dependencies?.length ? `: ${b.dependencies.map((d) => `${d.label ?? d.taskId} (${d.state})`).join(', ')}` : ''}
            {b.position ? `: ${b.position.ahead} ahead on ${b.taskQueueId}` : ''} — {b.action}
            {b.kind === 'dependency-failed' &&
              answer.taskGraphId &&
              b.dependencies?.map((d) => d.label && <RerunButton key={d.taskId} taskGraphId={answer.taskGraphId as string} label={d.label} />)}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** Root causes a running graph shows: its tasks wait on a worker pool nobody serves (a mistyped workerType, say). */
const RUNNING_CAUSES = new Set(['no-workers', 'quarantined']);

/**
 * The graph's root causes, under the blocked-graph banner: what holds the most tasks back first. A running graph
 * shows only the causes that will not clear by themselves (RUNNING_CAUSES), so a graph waiting for ever on a pool
 * without workers says so while it is still `running`.
 */
export function GraphWhy(props: { taskGraphId: string; refresh: string; enabled: boolean; running: boolean; action: Action }) {
  const { taskGraphId, refresh, enabled, running, action } = props;
  const { answer } = useExplanation<{ summary: string; rootCauses: RootCause[] }>('scheduler', `/task-graph/${taskGraphId}/explain?limit=5`, refresh, enabled);
  const causes = (enabled && answer?.rootCauses.filter((c) => !running || RUNNING_CAUSES.has(c.kind))) || [];
  if (causes.length === 0) return null;
  return (
    <ul class={`root-causes${running ? ' waiting' : ''}`} role="status">
      {causes.map((c, k) => (
        <li key={k} data-kind={c.kind}>
          {running && 'Waiting: '}
          <b>{c.count}</b> task{c.count === 1 ? '' : 's'}: {c.kind}
          {c.label || c.taskQueueId ? ` ${c.label ?? c.taskQueueId}` : ''} — {c.action}
          {c.kind === 'dependency-failed' && c.label && <RerunButton taskGraphId={taskGraphId} label={c.label} shared={action} />}
        </li>
      ))}
    </ul>
  );
}
