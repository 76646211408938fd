// The graph's tasks as a table: sortable by state, label or duration, filtered by state, virtualised (only the
// rows in view exist in the DOM, so 30,000 tasks cost a few dozen elements).
import { useMemo, useState } from 'preact/hooks';
import type { GraphStore } from '../graph/store';
import { STATE_NAMES } from '../states';
import { duration } from './format';
import { StateBadge } from './TaskDetails';
import { AmendBadge } from './AmendBadge';
import { AMEND_MARKS, SUPERSEDED } from '../graph/amendMarks';

const ROW_HEIGHT = 24;
const VIEW_ROWS = 8;

type SortKey = 'state' | 'label' | 'duration';

export function TaskTable({ store, version }: { store: GraphStore; version: number }) {
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: 'state', desc: false });
  const [scrollTop, setScrollTop] = useState(0);
  const n = store.n;
  // Label order only changes when nodes are added.
  const byLabel = useMemo(() => {
    const d = store.data;
    if (!d) return new Uint32Array(0);
    const collator = new Intl.Collator(undefined, { numeric: true });
    return Uint32Array.from(Array.from({ length: d.n }, (_, i) => i).sort((a, b) => collator.compare(d.labels[a], d.labels[b])));
  }, [store, n]);
  const order = useMemo(() => {
    const d = store.data;
    if (!d) return [] as number[];
    const filter = store.stateFilter;
    const marked = store.amendFilter;
    // members; the nodes an amend replaced only when that is what the filter asks for
    let rows = Array.from(byLabel).filter(
      (i) => (d.members[i] || (marked === SUPERSEDED && d.amend[i] === SUPERSEDED)) && (filter === undefined || d.states[i] === filter) && (marked === undefined || d.amend[i] === marked),
    );
    if (sort.key === 'state') {
      // Stable counting sort by state code keeps label order within a state.
      const buckets: number[][] = STATE_NAMES.map(() => []);
      for (const i of rows) buckets[d.states[i]].push(i);
      rows = buckets.flat();
    } else if (sort.key === 'duration') {
      const now = Date.now();
      const dur = new Map(rows.map((i) => [i, store.duration(i, now)]));
      rows.sort((a, b) => {
        const x = dur.get(a) as number;
        const y = dur.get(b) as number;
        return Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : Number.isNaN(y) ? -1 : x - y;
      });
    }
    if (sort.desc) rows.reverse();
    return rows;
    // version: states changed
  }, [store, byLabel, sort, version, store.stateFilter, store.amendFilter]);

  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - 2);
  const last = Math.min(order.length, first + VIEW_ROWS + 5);
  const header = (key: SortKey, title: string) => (
    <button class={`sort ${sort.key === key ? 'active' : ''}`} data-sort={key} onClick={() => setSort({ key, desc: sort.key === key ? !sort.desc : false })}>
      {title}
      {sort.key === key ? (sort.desc ? ' ▼' : ' ▲') : ''}
    </button>
  );
  const d = store.data;
  return (
    <section class="task-table" aria-label="tasks">
      <div class="table-tools">
        <label>
          Show{' '}
          <select
            name="state-filter"
            value={store.stateFilter === undefined ? '' : STATE_NAMES[store.stateFilter]}
            onChange={(e) => {
              const v = e.currentTarget.value;
              store.setStateFilter(v ? STATE_NAMES.indexOf(v as (typeof STATE_NAMES)[number]) : undefined);
              setScrollTop(0);
            }}
          >
            <option value="">all states</option>
            {STATE_NAMES.slice(0, 6).map((s) => (
              <option value={s} key={s}>
                {s} ({store.counts[STATE_NAMES.indexOf(s)]})
              </option>
            ))}
          </select>
        </label>{' '}
        {store.amendCounts.some((count, code) => code > 0 && count > 0) && (
          <label>
            amended{' '}
            <select
              name="amend-filter"
              value={store.amendFilter === undefined ? '' : AMEND_MARKS[store.amendFilter].name}
              onChange={(e) => {
                const v = e.currentTarget.value;
                store.setAmendFilter(v ? AMEND_MARKS.findIndex((m) => m.name === v) : undefined);
                setScrollTop(0);
              }}
            >
              <option value="">any</option>
              {AMEND_MARKS.map((m, code) => (
                <option value={m.name} key={m.name} title={m.meaning}>
                  {m.name} ({store.amendCounts[code]})
                </option>
              ))}
            </select>
          </label>
        )}{' '}
        <span class="muted table-count">
          {order.length} of {store.counts.reduce((a, b) => a + b, 0)} tasks
        </span>
      </div>
      <div class="table-head row">
        <span class="c-label">{header('label', 'label')}</span>
        <span class="c-state">{header('state', 'state')}</span>
        <span class="c-dur">{header('duration', 'duration')}</span>
        <span class="c-runs">runs</span>
        <span class="c-id">taskId</span>
      </div>
      <div class="table-body" style={{ height: `${VIEW_ROWS * ROW_HEIGHT}px` }} onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}>
        <div style={{ height: `${order.length * ROW_HEIGHT}px`, position: 'relative' }}>
          {d &&
            order.slice(first, last).map((i, k) => {
              const state = STATE_NAMES[d.states[i]];
              const mark = d.amend[i] > 0 ? AMEND_MARKS[d.amend[i]] : undefined;
              return (
                <div
                  key={i}
                  class={`row ${store.selected === i ? 'selected' : ''}`}
                  data-label={d.labels[i]}
                  data-state={state}
                  data-cached={d.cached[i] ? '1' : undefined}
                  data-amend={mark?.name}
                  style={{ top: `${(first + k) * ROW_HEIGHT}px` }}
                  onClick={() => store.select(i, true)}
                >
                  <span class="c-label" title={d.labels[i]}>
                    {mark && <AmendBadge mark={mark} />}
                    {d.labels[i] || (d.members[i] ? '' : '(replaced)')}
                  </span>
                  <span class="c-state">
                    <StateBadge state={state} />
                  </span>
                  <span class="c-dur">{duration(store.duration(i))}</span>
                  <span class="c-runs" title={d.cached[i] ? 'reused from the cache: no worker ran it' : undefined}>
                    {d.cached[i] ? 'cached' : d.runs[i]}
                  </span>
                  <span class="c-id">{store.taskId(i)}</span>
                </div>
              );
            })}
        </div>
      </div>
    </section>
  );
}
