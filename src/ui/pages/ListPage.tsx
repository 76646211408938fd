// /ui/: task graphs, newest first, with state, counts by task state, routing and age; filtered by state; paged.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import { ago } from '../components/format';
import { TableHead } from '../components/TableHead';
import { href, navigate } from '../router';
import { GRAPH_STATE_COLORS, STATE_COLORS, STATE_NAMES } from '../states';

interface GraphSummary {
  status: { taskGraphId: string; state: string; routing: string };
  name: string;
  taskCount: number;
  counts: Record<string, number>;
  blockedBy: string[];
  created: string;
}

const GRAPH_STATES = ['running', 'blocked', 'finished', 'canceled', 'terminated'];
const PAGE = 25;

function listRoute(state: string, token?: string): string {
  const q = new URLSearchParams();
  if (state) q.set('state', state);
  if (token) q.set('continuationToken', token);
  const s = q.toString();
  return s ? `./?${s}` : './';
}

export function ListPage({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const token = query.get('continuationToken') ?? '';
  const [answer, setAnswer] = useState<{ taskGraphs: GraphSummary[]; continuationToken?: string }>();
  const [error, setError] = useState<string>();
  const [, tick] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    setAnswer(undefined);
    const load = async () => {
      const q = new URLSearchParams({ limit: String(PAGE) });
      if (state) q.set('state', state);
      if (token) q.set('continuationToken', token);
      try {
        const a = await apiGet<{ taskGraphs: GraphSummary[]; continuationToken?: string }>('scheduler', `/task-graphs?${q}`);
        if (stopped) return;
        setAnswer(a);
        setError(undefined);
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
      // The first page follows new graphs and state changes.
      if (!stopped && !token) timer = setTimeout(load, 3000);
      tick((t) => t + 1);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [state, token]);
  return (
    <div class="list-page">
      <div class="list-head">
        <h1>Task graphs</h1>
        <label>
          State{' '}
          <select name="graph-state" value={state} onChange={(e) => navigate(listRoute(e.currentTarget.value))}>
            <option value="">all</option>
            {GRAPH_STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {!answer && !error && <p class="muted">Loading…</p>}
      {answer && answer.taskGraphs.length === 0 && <p class="muted empty">No {state ? `${state} ` : ''}task graphs{token ? ' on this page' : ''}.</p>}
      {answer && answer.taskGraphs.length > 0 && (
        <table class="graphs">
          <TableHead columns={['graph', 'state', 'tasks', 'by state', 'routing', 'age']} />
          <tbody>
            {answer.taskGraphs.map((g) => (
              <tr key={g.status.taskGraphId} data-graph-id={g.status.taskGraphId} data-state={g.status.state}>
                <td>
                  <a href={href(`task-graph/${g.status.taskGraphId}`)}>{g.name || g.status.taskGraphId}</a>
                  <div class="mono muted small">{g.status.taskGraphId}</div>
                </td>
                <td>
                  <span class="badge" style={{ background: GRAPH_STATE_COLORS[g.status.state] }}>
                    {g.status.state}
                  </span>
                </td>
                <td class="num">{g.taskCount}</td>
                <td class="by-state">
                  {STATE_NAMES.slice(0, 6)
                    .filter((s) => g.counts[s])
                    .map((s) => (
                      <span key={s} class="count" data-count={s}>
                        <i class="swatch" style={{ background: STATE_COLORS[s] }} /> {g.counts[s]} {s}
                      </span>
                    ))}
                </td>
                <td>{g.status.routing}</td>
                <td title={g.created}>{ago(g.created)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div class="pager">
        {token && <a href={href(listRoute(state))}>← newest</a>}
        {answer?.continuationToken && <a href={href(listRoute(state, answer.continuationToken))}>older →</a>}
      </div>
    </div>
  );
}
