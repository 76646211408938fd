// /ui/task-graph/<taskGraphId>: header with counts, the drawing (WebGL), search, legend, the task table, and the
// side panel of the selected node. Everything updates live from the changes feed.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { GraphWhy } from '../components/Why';
import { ActionResult, ConfirmButton, useAction, useActionsEnabled } from '../components/Actions';
import { AmendPanel, appliedText } from '../components/AmendPanel';
import { AmendRing } from '../components/AmendBadge';
import { ago } from '../components/format';
import { TaskPanel } from '../components/TaskPanel';
import { TaskTable } from '../components/TaskTable';
import { GraphStore } from '../graph/store';
import { AMEND_MARKS, SUPERSEDED } from '../graph/amendMarks';
import { temporalLink } from '../settings';
import { GRAPH_STATE_COLORS, STATE_COLORS, STATE_NAMES } from '../states';

declare global {
  interface Window {
    /** For tests and the bench: the open graph. */
    tgsGraph?: GraphStore;
  }
}

function Counts({ store }: { store: GraphStore }) {
  return (
    <ul class="counts" aria-label="tasks by state">
      {STATE_NAMES.slice(0, 6).map((s, code) => (
        <li key={s} data-count={s}>
          <i class="swatch" style={{ background: STATE_COLORS[s] }} /> {s} <b>{store.counts[code]}</b>
        </li>
      ))}
      {store.counts[6] > 0 && (
        <li data-count="missing">
          <i class="swatch" style={{ background: STATE_COLORS.missing }} /> missing <b>{store.counts[6]}</b>
        </li>
      )}
    </ul>
  );
}

/** The amend marks the graph has (none for a graph never amended). */
function AmendLegend({ store }: { store: GraphStore }) {
  const shown = AMEND_MARKS.map((mark, code) => ({ mark, code })).filter(({ code }) => code > 0 && store.amendCounts[code] > 0);
  if (shown.length === 0) return null;
  return (
    <div class="legend amend-legend" aria-label="amend marks">
      {shown.map(({ mark }) => (
        <span key={mark.char} title={mark.meaning} data-mark={mark.name}>
          <AmendRing mark={mark} /> {mark.name}
        </span>
      ))}
    </div>
  );
}

function Legend() {
  return (
    <div class="legend" aria-label="legend">
      {STATE_NAMES.slice(0, 6).map((s) => (
        <span key={s}>
          <i class="dot" style={{ background: STATE_COLORS[s] }} /> {s}
        </span>
      ))}
      <span>
        <i class="dot blocking" /> blocking
      </span>
      <span>
        <i class="dot held" /> held back
      </span>
      <span class="muted">dependencies flow downwards</span>
    </div>
  );
}

function Search({ store }: { store: GraphStore }) {
  const [text, setText] = useState('');
  const [message, setMessage] = useState<string>();
  const suggestions = useMemo(() => (text.length >= 2 ? store.suggest(text) : []), [text, store.n]);
  const go = (idx: number | undefined) => {
    if (idx === undefined) {
      setMessage(`no task matches "${text}"`);
      return;
    }
    setMessage(undefined);
    store.select(idx, true);
  };
  return (
    <form
      class="search"
      onSubmit={(e) => {
        e.preventDefault();
        go(store.find(text));
      }}
    >
      <input name="search" type="search" placeholder="label or taskId" value={text} onInput={(e) => setText(e.currentTarget.value)} list="search-suggestions" />
      <datalist id="search-suggestions">
        {suggestions.map((i) => (
          <option key={i} value={store.label(i)} />
        ))}
      </datalist>
      <button type="submit">Find</button>
      {message && <span class="muted">{message}</span>}
    </form>
  );
}

export function GraphPage({ taskGraphId }: { taskGraphId: string }) {
  const store = useMemo(() => new GraphStore(taskGraphId), [taskGraphId]);
  const [version, setVersion] = useState(0);
  const canvas = useRef<HTMLCanvasElement>(null);
  const overlay = useRef<HTMLCanvasElement>(null);
  const cancel = useAction();
  const resume = useAction();
  const rerun = useAction();
  const signedIn = useActionsEnabled();
  const [amending, setAmending] = useState(false);
  const [amended, setAmended] = useState<{ ok: boolean; text: string }>();
  // A running graph with pending tasks asks why 10 s after the page sees them pending, then every 10 s (a pool without
  // workers shows while the graph runs); not at once, so the first frame needs nothing but the nodes and the feed.
  const [whyTick, setWhyTick] = useState(0);
  const waiting = store.header?.status.state === 'running' && store.counts[1] > 0;
  useEffect(() => {
    setWhyTick(0);
    if (!waiting) return;
    const timer = setInterval(() => setWhyTick((t) => t + 1), 10_000);
    return () => clearInterval(timer);
  }, [waiting]);
  useEffect(() => {
    window.tgsGraph = store;
    const off = store.subscribe(() => setVersion((v) => v + 1));
    store.attach(canvas.current as HTMLCanvasElement, overlay.current as HTMLCanvasElement);
    return () => {
      off();
      store.stop();
      if (window.tgsGraph === store) window.tgsGraph = undefined;
    };
  }, [store]);
  const header = store.header;
  const state = header?.status.state;
  const link = temporalLink(taskGraphId);
  // A blocking task a rerun has made pending or running blocks nothing any more: the banner waits for the graph's
  // next state instead of saying "Blocked by c (running)" meanwhile.
  const states = store.data?.states;
  const blocking = states ? store.blocking.filter((i) => ['failed', 'exception'].includes(STATE_NAMES[states[i]])) : [];
  return (
    <div class="graph-page">
      <header class="graph-header">
        <div class="title">
          <h1>{header?.name || 'Task graph'}</h1>
          <span class="mono muted">{taskGraphId}</span>
          {state && (
            <span class="graph-state badge" data-graph-state={state} style={{ background: GRAPH_STATE_COLORS[state] }} title={header?.stateReason || undefined}>
              {state}
            </span>
          )}
          {header?.stateReason && <span class="muted state-reason">{header.stateReason}</span>}
          {header && <span class="muted">created {ago(header.timeBase)}</span>}
          {header && <span class="muted">routing {header.status.routing || '—'}</span>}
          {link && (
            <a href={link} target="_blank" rel="noreferrer" class="temporal-link">
              workflow in Temporal
            </a>
          )}
          <span class="grow" />
          {state === 'terminated' && <span class="muted mono resume-hint">tgs graph resume {taskGraphId}</span>}
          {state === 'terminated' && (
            <ConfirmButton
              name="resume-graph"
              label="Resume graph"
              confirm="Start this graph's workflow again? Completed tasks do not run again."
              disabled={resume.busy || !signedIn.enabled}
              title={signedIn.title}
              onConfirm={() =>
                resume.run({ service: 'scheduler', method: 'POST', path: `/task-graph/${taskGraphId}/resume`, done: (a) => `Graph ${(a as { status: { state: string } }).status.state}.` })
              }
            />
          )}
          {state && state !== 'canceled' && (
            <button name="amend-graph" disabled={!signedIn.enabled || amending} title={signedIn.title ?? "Edit the graph's file: what changed runs again"} onClick={() => setAmending(true)}>
              Amend
            </button>
          )}
          {state && state !== 'finished' && state !== 'canceled' && (
            <ConfirmButton
              name="cancel-graph"
              label="Cancel graph"
              confirm="Cancel every unresolved task of this graph?"
              disabled={cancel.busy || !signedIn.enabled}
              title={signedIn.title}
              onConfirm={() =>
                cancel.run({ service: 'scheduler', method: 'POST', path: `/task-graph/${taskGraphId}/cancel`, done: (a) => `Graph ${(a as { status: { state: string } }).status.state}.` })
              }
            />
          )}
        </div>
        <ActionResult result={cancel.result} />
        <ActionResult result={resume.result} />
        <ActionResult result={rerun.result} />
        <ActionResult result={amended} />
        {amending && (
          <AmendPanel
            taskGraphId={taskGraphId}
            onClose={() => setAmending(false)}
            onApplied={(answer) => {
              setAmending(false);
              setAmended({ ok: true, text: appliedText(answer) });
              // the marks, the replaced nodes and the new ones: the feed carries none of them
              store.reload();
            }}
          />
        )}
        {header && (
          <div class="summary">
            <span class="total">
              {/* the graph's task count holds the tasks amends replaced too: they are no members, and counted apart */}
              <b data-total-tasks>{header.taskCount - store.amendCounts[SUPERSEDED]}</b> tasks
              {store.amendCounts[SUPERSEDED] > 0 && <span class="muted replaced-count"> (and {store.amendCounts[SUPERSEDED]} replaced by amends)</span>}
            </span>
            <Counts store={store} />
          </div>
        )}
        {blocking.length > 0 && (
          <p class="blocked-note" role="status">
            Blocked by{' '}
            {blocking.map((i, k) => (
              <span key={i}>
                {k > 0 && ', '}
                <button class="link blocking-task" onClick={() => store.select(i, true)}>
                  {store.label(i)}
                </button>{' '}
                ({STATE_NAMES[(store.data as NonNullable<GraphStore['data']>).states[i]]})
              </span>
            ))}
            {' '}— holding back <b class="held-back-count">{store.heldBack}</b> task{store.heldBack === 1 ? '' : 's'}.
          </p>
        )}
        <GraphWhy
          taskGraphId={taskGraphId}
          refresh={`${state}/${blocking.join(',')}/${waiting ? whyTick : ''}`}
          enabled={state === 'blocked' || (waiting && whyTick > 0)}
          running={state === 'running'}
          action={rerun}
        />
        {store.error && (
          <p class="error" role="alert">
            {store.error}
          </p>
        )}
        {store.liveError && <p class="error">{store.liveError}</p>}
      </header>
      <div class="graph-body">
        <div class="graph-main">
          <div class="toolbar">
            <Search store={store} />
            <button onClick={() => store.fit()} title="fit the whole graph">
              Fit
            </button>
            <button onClick={() => store.zoomBy(1.5)} title="zoom in">
              +
            </button>
            <button onClick={() => store.zoomBy(1 / 1.5)} title="zoom out">
              −
            </button>
            <Legend />
            <AmendLegend store={store} />
          </div>
          <div class="canvas-wrap">
            <canvas ref={canvas} class="graph-canvas" />
            <canvas ref={overlay} class="graph-overlay" />
            {!store.data && !store.error && <div class="loading">Loading the graph…</div>}
          </div>
          <TaskTable store={store} version={version} />
        </div>
        {store.selected !== undefined && store.data && <TaskPanel store={store} idx={store.selected} version={version} />}
      </div>
    </div>
  );
}
