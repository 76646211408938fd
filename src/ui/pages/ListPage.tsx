// /ui/: task graphs, newest first, with state, counts by task state, owner, duration, routing and age; filtered by
// state (the API's filter, paged) and searched by name or id, owner and duration (graphFilter.ts, over the newest
// graphs the API lists).
import { useEffect, useState } from 'preact/hooks';
import { apiGet, describeError } from '../api';
import { useCredentials } from '../components/SignIn';
import { ago, duration } from '../components/format';
import { graphDurationMs, matchesSearch, SEARCH_WINDOW, searchOf, type GraphSearch } from '../components/graphFilter';
import { TableHead } from '../components/TableHead';
import { href, navigate } from '../router';
import { GRAPH_STATE_COLORS, STATE_COLORS, STATE_NAMES } from '../states';

interface GraphSummary {
  status: { taskGraphId: string; state: string; routing: string };
  name: string;
  owner: string;
  submittedBy: string;
  taskCount: number;
  counts: Record<string, number>;
  blockedBy: string[];
  created: string;
  updated: string;
}

const GRAPH_STATES = ['running', 'blocked', 'finished', 'canceled', 'terminated'];
const PAGE = 25;

function listRoute(state: string, token?: string, search?: GraphSearch): string {
  const q = new URLSearchParams();
  if (state) q.set('state', state);
  if (token) q.set('continuationToken', token);
  if (search?.text) q.set('q', search.text);
  if (search?.owner) q.set('owner', search.owner);
  if (search?.minMinutes) q.set('minMinutes', String(search.minMinutes));
  if (search?.mine) q.set('mine', '1');
  const s = q.toString();
  return s ? `./?${s}` : './';
}

export function ListPage({ query }: { query: URLSearchParams }) {
  const state = query.get('state') ?? '';
  const token = query.get('continuationToken') ?? '';
  const credentials = useCredentials();
  const search = searchOf(query);
  const searching = search.text !== '' || search.owner !== '' || search.minMinutes > 0 || search.mine;
  const [text, setText] = useState(search.text);
  const [owner, setOwner] = useState(search.owner);
  const [minMinutes, setMinMinutes] = useState(search.minMinutes ? String(search.minMinutes) : '');
  const [answer, setAnswer] = useState<{ taskGraphs: GraphSummary[]; continuationToken?: string }>();
  const [error, setError] = useState<string>();
  const [, tick] = useState(0);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    setAnswer(undefined);
    const load = async () => {
      // a search looks through the newest SEARCH_WINDOW graphs at once (the API filters by state only)
      const q = new URLSearchParams({ limit: String(searching ? SEARCH_WINDOW : PAGE) });
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
  }, [state, token, searching]);
  const now = Date.now();
  const shown = answer?.taskGraphs.filter((g) => matchesSearch(g, search, credentials?.clientId, now));
  const apply = (mine = search.mine) => navigate(listRoute(state, undefined, { text: text.trim(), owner: owner.trim(), minMinutes: Number(minMinutes) || 0, mine }));
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
        <form
          class="graph-search"
          onSubmit={(e) => {
            e.preventDefault();
            apply();
          }}
        >
          <input name="q" type="search" placeholder="name or id" value={text} onInput={(e) => setText(e.currentTarget.value)} />
          <input name="owner" type="search" placeholder="owner" value={owner} onInput={(e) => setOwner(e.currentTarget.value)} />
          <input name="minMinutes" type="number" min="0" step="any" placeholder="took ≥ min" value={minMinutes} onInput={(e) => setMinMinutes(e.currentTarget.value)} />
          <button type="submit">Search</button>
          <label class="check" title={credentials ? `graphs whose owner is ${credentials.clientId}` : 'sign in to see your graphs'}>
            <input type="checkbox" name="mine" checked={search.mine} disabled={!credentials} onChange={(e) => apply(e.currentTarget.checked)} /> mine
          </label>
        </form>
      </div>
      {searching && answer && (
        <p class="muted search-note">
          {shown?.length ?? 0} of the newest {answer.taskGraphs.length} {state ? `${state} ` : ''}graphs match. <a href={href(listRoute(state))}>Clear the search</a>
        </p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {!answer && !error && <p class="muted">Loading…</p>}
      {shown && shown.length === 0 && !searching && <p class="muted empty">No {state ? `${state} ` : ''}task graphs{token ? ' on this page' : ''}.</p>}
      {shown && shown.length > 0 && (
        <table class="graphs">
          <TableHead columns={['graph', 'state', 'tasks', 'by state', 'owner', 'took', 'routing', 'age']} />
          <tbody>
            {shown.map((g) => (
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
                <td class="owner small">{g.owner}</td>
                <td class="took" title={['running', 'blocked'].includes(g.status.state) ? 'so far' : 'created to last change'}>
                  {duration(graphDurationMs(g, now))}
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
        {answer?.continuationToken && !searching && <a href={href(listRoute(state, answer.continuationToken))}>older →</a>}
      </div>
    </div>
  );
}
