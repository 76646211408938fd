// /ui/hooks: every hook, group by group, with its schedule, its next fire and its latest fires, each fire linking to
// the task (or task-graph) it created. Hooks' reads need scopes (Taskcluster's hooks:list-hooks:, hooks:status:,
// hooks:list-last-fires:), so they are signed with the session's credentials; signed out, the page says to sign in.
// Each hook has its actions: pause or resume its schedule, trigger it now, edit its definition.
import { useEffect, useState } from 'preact/hooks';
import { ApiError, apiSigned, describeError } from '../api';
import { ActionResult, useAction } from '../components/Actions';
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
  /** Its schedule is paused (tgs's pauseHook): no next fire to show. */
  paused: boolean;
  fires: Fire[];
}

/** Fires shown per hook: the latest few (listLastFires has them all). */
const FIRES_SHOWN = 3;
/** Hooks read at once: each is two requests (status and last fires). */
const PARALLEL = 8;

const path = (h: { hookGroupId: string; hookId: string }) => `/hooks/${encodeURIComponent(h.hookGroupId)}/${encodeURIComponent(h.hookId)}`;

async function readHook(hook: Hook): Promise<HookRow> {
  const [status, schedule, fires] = await Promise.all([
    apiSigned<{ nextScheduledDate?: string }>('hooks', 'GET', `${path(hook)}/status`),
    hook.schedule.length ? apiSigned<{ paused: boolean }>('hooks', 'GET', `${path(hook)}/schedule`) : { paused: false },
    apiSigned<{ lastFires: Fire[] }>('hooks', 'GET', `${path(hook)}/last-fires?limit=${FIRES_SHOWN}`).catch((err: unknown) => {
      // a hook that never fired answers 404 (Taskcluster)
      if (err instanceof ApiError && err.status === 404) return { lastFires: [] };
      throw err;
    }),
  ]);
  return { hook, nextScheduledDate: status.nextScheduledDate, paused: schedule.paused, fires: fires.lastFires };
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

/** A refused fire's reason as text: the hooks service records `{"message": …}` (JSON) or plain text. */
export function fireErrorText(error: string): string {
  try {
    const parsed = JSON.parse(error) as unknown;
    if (parsed && typeof parsed === 'object' && typeof (parsed as { message?: unknown }).message === 'string') return (parsed as { message: string }).message;
  } catch {
    // plain text
  }
  return error;
}

function FireCell({ fire }: { fire: Fire }) {
  if (fire.result === 'error') {
    return (
      <div class="fire" data-fire-result="error">
        <span class="badge" style={{ background: STATE_COLORS.exception }}>
          error
        </span>{' '}
        <span class="muted small">
          {fire.firedBy}, {ago(fire.taskCreateTime)}
        </span>
        <pre class="fire-error">{fireErrorText(fire.error)}</pre>
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

/** The definition updateHook takes: everything but the ids. */
function editable(definition: Record<string, unknown>): string {
  const rest = { ...definition };
  delete rest.hookGroupId;
  delete rest.hookId;
  return JSON.stringify(rest, null, 2);
}

/** Pause or resume, trigger, edit: each signed, its outcome (or the refusal, in full) under the buttons. */
function HookActions({ row, onChanged }: { row: HookRow; onChanged: () => void }) {
  const { hook, paused } = row;
  const action = useAction();
  const [editing, setEditing] = useState<string>();
  const run = async (spec: Parameters<typeof action.run>[0]) => {
    const ok = await action.run(spec);
    onChanged();
    return ok;
  };
  return (
    <div class="hook-actions">
      {hook.schedule.length > 0 && (
        <button
          name={paused ? 'resume-hook' : 'pause-hook'}
          disabled={action.busy}
          onClick={() =>
            void run({ service: 'hooks', method: 'POST', path: `${path(hook)}/${paused ? 'unpause' : 'pause'}`, done: () => (paused ? 'Resumed: it fires from its next schedule time.' : 'Paused: no scheduled fires until resumed.') })
          }
        >
          {paused ? 'Resume' : 'Pause'}
        </button>
      )}{' '}
      <button
        name="trigger-hook"
        disabled={action.busy}
        onClick={() =>
          void run({
            service: 'hooks',
            method: 'POST',
            path: `${path(hook)}/trigger`,
            body: {},
            done: (a) => ((a as { taskId?: string }).taskId ? `Fired: ${(a as { taskId: string }).taskId}.` : 'Fired: the template rendered no task.'),
          })
        }
      >
        Trigger
      </button>{' '}
      <button
        name="edit-hook"
        disabled={action.busy}
        onClick={() => {
          action.clear();
          apiSigned<Record<string, unknown>>('hooks', 'GET', path(hook)).then(
            (d) => setEditing(editable(d)),
            (err: unknown) => setEditing(`// cannot read the definition: ${describeError(err)}`),
          );
        }}
      >
        Edit
      </button>
      {editing !== undefined && (
        <form
          class="hook-edit"
          onSubmit={(e) => {
            e.preventDefault();
            let body: unknown;
            try {
              body = JSON.parse(editing);
            } catch (err) {
              action.fail(`Not saved: the definition is not JSON (${(err as Error).message}).`);
              return;
            }
            void run({ service: 'hooks', method: 'POST', path: path(hook), body, done: () => 'Saved.' }).then((ok) => ok && setEditing(undefined));
          }}
        >
          <textarea name="hook-definition" rows={16} value={editing} onInput={(e) => setEditing(e.currentTarget.value)} />
          <div>
            <button type="submit" name="save-hook">
              Save
            </button>{' '}
            <button type="button" onClick={() => setEditing(undefined)}>
              Close
            </button>
          </div>
        </form>
      )}
      <ActionResult result={action.result} />
    </div>
  );
}

export function HooksPage() {
  const [rows, setRows] = useState<HookRow[]>();
  const [error, setError] = useState<string>();
  const [signedIn, setSignedIn] = useState(getCredentials() !== undefined);
  const [, tick] = useState(0);
  // bumped after an action: the page reads the hooks again at once
  const [reload, setReload] = useState(0);
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
  }, [signedIn, reload]);
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
          <TableHead columns={['hook', 'fired by', 'next fire', 'last fires', 'actions']} />
          <tbody>
            {rows.map((row) => {
              const { hook, nextScheduledDate, paused, fires } = row;
              return (
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
                <td class="next-fire" data-paused={paused ? '1' : undefined} title={paused ? 'its schedule is paused: Resume to fire again' : nextScheduledDate}>
                  {paused ? <span class="badge paused">paused</span> : nextScheduledDate ? fromNow(nextScheduledDate) : <span class="muted">—</span>}
                </td>
                <td class="last-fires">
                  {fires.length === 0 ? <span class="muted">never fired</span> : fires.map((f) => <FireCell key={f.taskId} fire={f} />)}
                </td>
                <td>
                  <HookActions row={row} onChanged={() => setReload((r) => r + 1)} />
                </td>
              </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}
