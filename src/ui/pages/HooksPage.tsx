// /ui/hooks: every hook, group by group, with its schedule, its next fire and its latest fires, each fire linking to
// the task (or task-graph) it created. Hooks' reads need scopes (Taskcluster's hooks:list-hooks:, hooks:status:,
// hooks:list-last-fires:), so they are signed with the session's credentials; signed out, the page says to sign in.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, apiSigned, describeError } from '../api';
import { ago, fromNow } from '../components/format';
import { TableHead } from '../components/TableHead';
import { href } from '../router';
import { getCredentials, onCredentialsChange } from '../session';
import { STATE_COLORS } from '../states';

interface Hook {
  hookGroupId: string;
  hookId: string;
  metadata: { name: string };
  schedule: string[];
  bindings?: { exchange: string; routingKeyPattern: string }[];
}
interface Fire {
  taskId: string;
  firedBy: string;
  taskCreateTime: string;
  result: 'success' | 'error';
  taskState: string;
  error: string;
}
interface HookRow {
  hook: Hook;
  nextScheduledDate?: string;
  fires: Fire[];
}

/** Fires shown per hook: the latest few (listLastFires has them all). */
const FIRES_SHOWN = 3;
/** Hooks read at once: each is two requests (status and last fires). */
const PARALLEL = 8;

const path = (h: { hookGroupId: string; hookId: string }) => `/hooks/${encodeURIComponent(h.hookGroupId)}/${encodeURIComponent(h.hookId)}`;

async function readHook(hook: Hook): Promise<HookRow> {
  const [status, fires] = await Promise.all([
    apiSigned<{ nextScheduledDate?: string }>('hooks', 'GET', `${path(hook)}/status`),
    apiSigned<{ lastFires: Fire[] }>('hooks', 'GET', `${path(hook)}/last-fires?limit=${FIRES_SHOWN}`).catch((err: unknown) => {
      // a hook that never fired answers 404 (Taskcluster)
      if (err instanceof ApiError && err.status === 404) return { lastFires: [] };
      throw err;
    }),
  ]);
  return { hook, nextScheduledDate: status.nextScheduledDate, fires: fires.lastFires };
}

async function readHooks(): Promise<HookRow[]> {
  const { groups } = await apiSigned<{ groups: string[] }>('hooks', 'GET', '/hooks');
  const hooks: Hook[] = [];
  for (const group of groups) hooks.push(...(await apiSigned<{ hooks: Hook[] }>('hooks', 'GET', `/hooks/${encodeURIComponent(group)}`)).hooks);
  const rows: HookRow[] = [];
  for (let i = 0; i < hooks.length; i += PARALLEL) rows.push(...(await Promise.all(hooks.slice(i, i + PARALLEL).map(readHook))));
  return rows;
}

/**
 * Where a fire leads: its task, or for a hook whose template renders a task-graph (tgs's extension) the graph, whose
 * taskGraphId is the fire's taskId and which has no task of that id (the queue answers its state `unknown`).
 */
const fireTarget = (f: Fire) => (f.taskState === 'unknown' ? `task-graph/${f.taskId}` : `task/${f.taskId}`);

function FireCell({ fire }: { fire: Fire }) {
  if (fire.result === 'error') {
    return (
      <div class="fire" data-fire-result="error" title={fire.error}>
        <span class="badge" style={{ background: STATE_COLORS.exception }}>
          error
        </span>{' '}
        <span class="muted small">
          {fire.firedBy}, {ago(fire.taskCreateTime)}
        </span>
      </div>
    );
  }
  return (
    <div class="fire" data-fire-result="success" data-task-id={fire.taskId}>
      <a href={href(fireTarget(fire))} class="mono">
        {fire.taskId}
      </a>{' '}
      <span class="badge" style={{ background: (STATE_COLORS as Record<string, string>)[fire.taskState] ?? STATE_COLORS.missing }}>
        {fire.taskState === 'unknown' ? 'graph' : fire.taskState}
      </span>{' '}
      <span class="muted small">
        {fire.firedBy}, {ago(fire.taskCreateTime)}
      </span>
    </div>
  );
}

export function HooksPage() {
  const [rows, setRows] = useState<HookRow[]>();
  const [error, setError] = useState<string>();
  const [signedIn, setSignedIn] = useState(getCredentials() !== undefined);
  const [, tick] = useState(0);
  useEffect(() => onCredentialsChange(() => setSignedIn(getCredentials() !== undefined)), []);
  useEffect(() => {
    if (!signedIn) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const r = await readHooks();
        if (stopped) return;
        setRows(r);
        setError(undefined);
      } catch (err) {
        if (!stopped) setError(describeError(err));
      }
      // next fires come and go: the page follows them
      if (!stopped) timer = setTimeout(load, 5000);
      tick((t) => t + 1);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [signedIn]);
  return (
    <div class="list-page hooks-page">
      <div class="list-head">
        <h1>Hooks</h1>
      </div>
      {!signedIn && <p class="muted">Sign in to see hooks: reading them needs the hooks: scopes of Taskcluster's hooks service.</p>}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {signedIn && !rows && !error && <p class="muted">Loading…</p>}
      {rows && rows.length === 0 && <p class="muted empty">No hooks.</p>}
      {rows && rows.length > 0 && (
        <table class="hooks">
          <TableHead columns={['hook', 'fired by', 'next fire', 'last fires']} />
          <tbody>
            {rows.map(({ hook, nextScheduledDate, fires }) => (
              <tr key={`${hook.hookGroupId}/${hook.hookId}`} data-hook={`${hook.hookGroupId}/${hook.hookId}`}>
                <td>
                  {hook.metadata.name}
                  <div class="mono muted small">
                    {hook.hookGroupId}/{hook.hookId}
                  </div>
                </td>
                <td class="small">
                  {hook.schedule.map((s) => (
                    <div key={s} class="mono">
                      {s}
                    </div>
                  ))}
                  {(hook.bindings ?? []).map((b) => (
                    <div key={`${b.exchange} ${b.routingKeyPattern}`} class="mono">
                      {b.exchange} {b.routingKeyPattern}
                    </div>
                  ))}
                  {hook.schedule.length === 0 && (hook.bindings ?? []).length === 0 && <span class="muted">triggers only</span>}
                </td>
                <td class="next-fire" title={nextScheduledDate}>
                  {nextScheduledDate ? fromNow(nextScheduledDate) : <span class="muted">—</span>}
                </td>
                <td class="last-fires">
                  {fires.length === 0 ? <span class="muted">never fired</span> : fires.map((f) => <FireCell key={f.taskId} fire={f} />)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
