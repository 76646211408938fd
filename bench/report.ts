/** Renders a bench result (bench/results/*.json) as the markdown table docs/benchmarks.md holds. */
type Results = Record<string, any>;

const fmt = (v: unknown, unit = '') => (v === undefined || v === null || Number.isNaN(v) ? '—' : `${v}${unit}`);
/** `{postgres: 1.7, api: 1.2, total: 5.1}` → "total 5.1 ms: postgres 1.7, api 1.2" */
const cpu = (c: Record<string, number> | undefined) =>
  c ? `CPU per task ${c.total} ms: ${Object.entries(c).filter(([k]) => k !== 'total').map(([k, v]) => `${k} ${v}`).join(', ')}` : '';

export function renderMarkdown(r: Results): string {
  const m = r.machine ?? {};
  const lines = [
    `Machine: ${m.cpus} × ${m.cpuModel ?? 'CPU'}, ${m.memGiB} GiB RAM; Node ${m.node}; ${m.temporal}; PostgreSQL ${m.postgres}${m.postgresVia ? ` (via ${m.postgresVia})` : ''}${m.autovacuum ? `, autovacuum ${m.autovacuum}` : ''}; RabbitMQ ${m.rabbitmq}.`,
    `Run ${r.date}${r.quick ? ' (--quick sizes)' : ''}; processes: ${r.processes ?? 'single'}; ${r.warm ? 'warmed up, the database vacuumed and analyzed before each scenario (bench/settle.ts)' : 'fresh processes, no vacuum between scenarios (--cold)'}.`,
    '',
    '| scenario | figure | tgs | compared with | goal |',
    '|---|---|---|---|---|',
  ];
  if (r.hop) {
    const h = r.hop;
    lines.push(
      `| hop (chain of tasks) | p50 / p95 / p99 | ${fmt(h.p50_ms, ' ms')} / ${fmt(h.p95_ms, ' ms')} / ${fmt(h.p99_ms, ' ms')} | floor: signal → activity → UPDATE p50 ${fmt(h.floor_p50_ms, ' ms')}, p99 ${fmt(h.floor_p99_ms, ' ms')} (local activity p50 ${fmt(h.floor_local_p50_ms, ' ms')}); queue floor scheduleTask → claimed p50 ${fmt(h.queue_floor_p50_ms, ' ms')}; split: report → signal p50 ${fmt(h.report_to_signal_p50_ms, ' ms')} (report → published ${fmt(h.report_to_published_p50_ms, ' ms')}, published → delivered ${fmt(h.published_to_delivered_p50_ms, ' ms')}, delivered → signal ${fmt(h.delivered_to_signal_p50_ms, ' ms')}), signal → claimed p50 ${fmt(h.signal_to_claim_p50_ms, ' ms')} (signal → pending ${fmt(h.signal_to_pending_p50_ms, ' ms')}, pending → claimed ${fmt(h.pending_to_claim_p50_ms, ' ms')}) | p50 ≤ 30 ms, p99 ≤ 250 ms, p50 ≤ 2× floor (${h.floor_p50_ms ? (h.p50_ms / h.floor_p50_ms).toFixed(1) : '—'}×) |`,
      `| hop of a cache hit (chain of cached nodes) | ready → dependent scheduled p50 (hit / normal), hit p99 | ${fmt(h.cache_hit_hop_p50_ms, ' ms')} / ${fmt(h.cache_miss_hop_p50_ms, ' ms')}, ${fmt(h.cache_hit_hop_p99_ms, ' ms')} | the same chain run twice: its misses, then its hits (run times, ms resolution) | hit < normal |`,
    );
  }
  if (r.throughput) {
    const t = r.throughput;
    lines.push(`| throughput (1 → ${t.tasks - 2} → 1${t.transport ? `, worker: ${t.transport}` : ''}) | submit → finished | ${fmt(t.seconds, ' s')}, ${fmt(t.tasks_per_s)} tasks/s | ${cpu(t.cpu_ms_per_task)} | ≥ 1,000 tasks/s |`);
    if (t.cores_run) {
      const show = (c: { busy: number; iowait: number; idle: number }) => `${fmt(c.busy)} busy, ${fmt(c.iowait)} waiting on the disk, ${fmt(c.idle)} idle`;
      lines.push(
        `| | the machine's cores (/proc/stat): during the submit (${fmt(t.phases?.submitted_s, ' s')}); from its answer to finished | ${show(t.cores_submit)}; ${show(t.cores_run)} | ` +
          `the machine's busy CPU per task ${fmt(t.machine_busy_ms_per_task, ' ms')}, the stack's processes' ${fmt(t.cpu_ms_per_task?.total, ' ms')} (bench/machineCpu.ts) | |`,
      );
    }
    if (t.per_task) {
      const p = t.per_task;
      lines.push(`| | per task: Postgres transactions, rows written, messages, workflow tasks | ${fmt(p.pg_transactions)}, ${fmt(p.pg_rows_written)}, ${fmt(p.messages)}, ${fmt(p.workflow_tasks)} | counted (bench/perTaskCounts.ts): the machine's speed does not move them | fewer |`);
    }
  }
  if (r.amend) {
    const a = r.amend;
    lines.push(`| amend (one middle node of the ${fmt(a.tasks)}-task graph, finished) | amend answered / first rerun claimed / finished again | ${fmt(a.amend_answered_ms, ' ms')} / ${fmt(a.first_rerun_claimed_ms, ' ms')} / ${fmt(a.finished_again_ms, ' ms')}; ${fmt(a.claims_after_amend)} claims | rerunning the graph: ${fmt(a.claims_first_run)} claims | claims: the changed node only (the sink that requires it is kept by the early cutoff: same outputs) |`);
  }
  if (r.throughput_cold) {
    const t = r.throughput_cold;
    lines.push(`| | the same graph first, on fresh processes (the warm-up) | ${fmt(t.seconds, ' s')}, ${fmt(t.tasks_per_s)} tasks/s | ${cpu(t.cpu_ms_per_task)} | |`);
  }
  if (r.scale) {
    const s = r.scale;
    const rss = Object.entries(s.max_rss_mb ?? {}).map(([k, v]) => `${k} ${v} MB`).join(', ');
    const submitRss = Object.entries(s.submit_max_rss_mb ?? {}).map(([k, v]) => `${k} ${v} MB`).join(', ');
    lines.push(
      `| scale (${s.tasks} tasks, ${s.edges} edges) | submit / finish | ${fmt(s.submit_s, ' s')} / ${fmt(s.finish_s, ' s')} (${s.finish_s ? fmt(Math.round(s.tasks / s.finish_s)) : '—'} tasks/s) | ${cpu(s.cpu_ms_per_task)}${s.cpu_ms_per_task_submit ? ` (the submit ${s.cpu_ms_per_task_submit.total} ms${s.cpu_ms_per_task_submit_postgres ? `; its Postgres share: ${Object.entries(s.cpu_ms_per_task_submit_postgres).filter(([k]) => k !== 'total').map(([k, v]) => `${k} ${v}`).join(', ')}` : ''})` : ''} | submit < 20 s, finishes at ≥ 80 % of the 10k graph's tasks/s |`,
      `| | peak RSS per process (up to the end of the submit: ${submitRss || '—'}) | ${rss} | the bench process builds the whole graph and its JSON (a harness, not a tgs process) | every tgs process < 512 MB |`,
      `| | continue-as-new, largest run history | ${fmt(s.continue_as_new)} runs continued; ${fmt(s.max_history_events)} events, ${s.max_history_bytes ? (s.max_history_bytes / 2 ** 20).toFixed(1) : '—'} MB | Temporal: 50k events / 50 MB hard limit | |`,
    );
  }
  if (r.queue) {
    const q = r.queue;
    lines.push(
      `| queue | enqueue → claim p50 / p99 | ${fmt(q.claim_p50_ms, ' ms')} / ${fmt(q.claim_p99_ms, ' ms')} | Taskcluster workers sleep 1 s between empty polls | p50 ≤ 10 ms |`,
      `| | claim + complete, 16 claimers | ${fmt(q.claim_complete_per_s)} tasks/s claiming 1 per call; ${fmt(q.claim_complete_batch8_per_s)} tasks/s claiming up to 8 | ${cpu(q.cpu_ms_per_task)} (1 per call) | ≥ 2,000 tasks/s |`,
      `| | the same, claiming up to 8 a call | ${fmt(q.claim_complete_batch8_per_s)} tasks/s | ${cpu(q.cpu_ms_per_task_batch8)}; floor, the same claims and reports as bare statements from 16 loops (no HTTP, Hawk or API): ${fmt(q.floor_per_s)} tasks/s, ${q.cpu_ms_per_task_floor ? cpu(q.cpu_ms_per_task_floor) : '—'} | |`,
      `| | the same over the worker stream (capacity 128: claims pushed, reports in frames) | ${fmt(q.claim_complete_stream_per_s)} tasks/s | ${q.cpu_ms_per_task_stream ? cpu(q.cpu_ms_per_task_stream) : '—'} | |`,
      `| | createTask, 50 at once | ${fmt(q.create_per_s)} tasks/s | ${cpu(q.cpu_ms_per_task_create)} | |`,
    );
  }
  if (r.peer) lines.push(...peerRows(r.peer));
  if (r.ui) {
    for (const row of r.ui.sizes ?? []) {
      lines.push(`| ui (${row.tasks} tasks) | layout / first draw | ${fmt(row.layout_ms, ' ms')} / ${fmt(row.first_draw_ms, ' ms')} | | first frame ≤ 3 s at 100k |`);
    }
    const live = r.ui.live;
    if (live) {
      lines.push(
        `| ui live (${live.tasks} tasks, ${live.changes_per_s} changes/s for ${live.seconds} s) | frame gap p95 / max; change → drawn p50 / p95 | ${fmt(live.frame_gap_p95_ms, ' ms')} / ${fmt(live.frame_gap_max_ms, ' ms')}; ${fmt(live.change_to_drawn_p50_ms, ' ms')} / ${fmt(live.change_to_drawn_p95_ms, ' ms')} (${fmt(live.changes_not_drawn)} not drawn) | | drawn within 1 s |`,
      );
    }
  }
  lines.push(...ratioRows(r));
  return lines.join('\n');
}

/** What each drain of the peer scenario is, in the order of its rows. */
const PEER_ROWS: [string, string][] = [
  ['stream', 'tgs, worker stream (capacity 128; an AMQP message a state change, auth, run history)'],
  ['claim_complete', "tgs, claim + complete with Taskcluster's calls (up to 8 a claim)"],
  ['default', 'graphile-worker, default (a get and a complete statement a job; the job deleted)'],
  ['batched', 'graphile-worker, batched (`localQueue.size` 500, completions batched: its fast mode)'],
  ['default-equal', 'graphile-worker, default, equal work (an event row a state change, completed jobs kept)'],
  ['batched-equal', 'graphile-worker, batched, equal work'],
  ['lane-floor-500', "a batched lane's floor, 500 a batch (the least work under the rules: a statement a batch writing its outbox rows, messages persistent and confirmed a batch at a time, the bridge's quorum queue drained; bench/floor/batchedLane.ts)"],
  ['lane-floor-100', "the same floor, 100 a batch"],
];

/** The peer scenario (bench/scenarios/peer.ts): each drain's tasks a second and CPU per task, the medians of its rounds. */
export function peerRows(p: Results): string[] {
  const rows = [`| peer (${fmt(p.jobs)} no-op tasks a drain, 16 workers, ${p.figures?.stream?.rounds_per_s?.length ?? '—'} rounds alternated; graphile-worker ${fmt(p.peer_version)}, same Postgres) | the median of the rounds' tasks/s (each round's); the machine's busy CPU per task (/proc/stat; each round's) | | CPU per task by process (the round of the median tasks/s); per task: Postgres transactions, rows written | |`];
  for (const [key, what] of PEER_ROWS) {
    const f = p.figures?.[key];
    if (!f) continue;
    const messages = f.per_task?.messages === undefined ? '' : `, ${fmt(f.per_task.messages)} messages`;
    const counts = f.per_task ? `; ${fmt(f.per_task.pg_transactions)}, ${fmt(f.per_task.pg_rows_written)}${messages}` : '';
    // the floor's RabbitMQ a message: what a persistent confirmed message costs it, and a quorum-queued one more
    const rabbit = f.rabbitmq_ms_per_message ? `; RabbitMQ a message ${fmt(f.rabbitmq_ms_per_message.unrouted, ' ms')} routed to no queue, ${fmt(f.rabbitmq_ms_per_message.quorum_queued_extra, ' ms')} more into the quorum queue` : '';
    const machine = f.rounds_machine_ms_per_task ? ` (${f.rounds_machine_ms_per_task.join(', ')})` : '';
    rows.push(`| | ${what} | ${fmt(f.per_s)} tasks/s (${(f.rounds_per_s ?? []).join(', ')}); ${fmt(f.machine_ms_per_task, ' ms')}${machine} | ${cpu(f.cpu_ms_per_task)}${counts}${rabbit} | |`);
  }
  return rows;
}

const ratio = (a: number | undefined, b: number | undefined) => (a && b ? a / b : undefined);
/** The bench's own process when tgs runs in processes of its own: the fast worker, the caller of the API. */
const CALLER_PROCESS = 'bench (fast worker)';
const showRatio = (x: number | undefined, unit = '×') => (x === undefined ? '—' : `${x.toFixed(2)}${unit}`);

/**
 * Each cost as a ratio to a floor measured in the same run (so a slower or busier machine moves both): the 10k
 * graph's CPU per task against claim + complete's floor (the same claims and reports as bare statements), its tasks/s
 * against what its CPU per task allows on the machine's cores, claim + complete against its floor, the hop against
 * its Temporal floor; and the 100k submit's CPU per task. The goals: docs/benchmarks.md § The scenarios and their goals.
 */
export function ratioRows(r: Results): string[] {
  const t = r.throughput;
  const q = r.queue;
  const h = r.hop;
  const s = r.scale;
  const cores = r.machine?.cpus as number | undefined;
  const rows: string[] = [];
  if (t && q) {
    const x = ratio(t.cpu_ms_per_task?.total, q.cpu_ms_per_task_floor?.total);
    rows.push(`| | 10k graph CPU per task ÷ claim + complete floor's | ${showRatio(x)} | ${fmt(t.cpu_ms_per_task?.total, ' ms')} ÷ ${fmt(q.cpu_ms_per_task_floor?.total, ' ms')} | ≤ 2× |`);
  }
  if (t && cores) {
    const allowed = t.cpu_ms_per_task?.total ? (cores * 1000) / t.cpu_ms_per_task.total : undefined;
    rows.push(`| | 10k graph tasks/s ÷ what its CPU per task allows on ${cores} cores | ${showRatio(ratio(t.tasks_per_s, allowed), '')} | ${fmt(t.tasks_per_s)} ÷ ${allowed ? Math.round(allowed) : '—'} | ≥ 0.9 |`);
  }
  if (q) {
    // rounds of the drain and its floor alternated: the median of the rounds' ratios, and each round's figures
    const rounds = q.claim_complete_batch8_rounds_per_s as number[] | undefined;
    const floors = q.floor_rounds_per_s as number[] | undefined;
    const figures = rounds && floors && rounds.length > 1
      ? `the median of ${rounds.length} rounds alternated: ${rounds.map((n, i) => `${fmt(n)} ÷ ${fmt(floors[i])}`).join(', ')} tasks/s`
      : `${fmt(q.claim_complete_batch8_per_s)} ÷ ${fmt(q.floor_per_s)} tasks/s`;
    rows.push(`| | claim + complete (up to 8 a claim) ÷ its floor | ${showRatio(q.claim_complete_floor_ratio ?? ratio(q.claim_complete_batch8_per_s, q.floor_per_s), '')} | ${figures} | ≥ 0.6 |`);
    // the capacity a deployment gets: the caller (the fast worker, a Taskcluster worker elsewhere in a deployment) is
    // not the server's cost, so the drain's CPU a task without it against the floor's (all of which is server work)
    const drainCpu = q.cpu_ms_per_task_batch8 as Record<string, number> | undefined;
    const caller = drainCpu?.[CALLER_PROCESS];
    if (drainCpu?.total && caller !== undefined && q.cpu_ms_per_task_floor?.total) {
      const server = drainCpu.total - caller;
      rows.push(
        `| | claim + complete (up to 8 a claim) ÷ its floor, by CPU a task, the server's processes only | ${showRatio(ratio(q.cpu_ms_per_task_floor.total, server), '')} | ${fmt(q.cpu_ms_per_task_floor.total, ' ms')} ÷ ${fmt(Math.round(server * 100) / 100, ' ms')} (${fmt(drainCpu.total, ' ms')} less the caller's ${fmt(caller, ' ms')}) | ≥ 0.6 |`,
      );
    }
    if (q.claim_complete_stream_per_s) {
      rows.push(`| | claim + complete over the worker stream ÷ the same floor | ${showRatio(ratio(q.claim_complete_stream_per_s, q.floor_per_s), '')} | ${fmt(q.claim_complete_stream_per_s)} ÷ ${fmt(q.floor_per_s)} tasks/s | |`);
    }
  }
  const pr = r.peer?.ratios;
  if (pr) {
    // each round's pair beside the median of the rounds' ratios: with two rounds the median is the lower ratio
    const f = r.peer.figures ?? {};
    const pairs = (a: string, b: string, key: 'rounds_per_s' | 'rounds_machine_ms_per_task' | 'rounds_counted_ms_per_task', unit: string) => {
      const as: number[] = f[a]?.[key] ?? [];
      const bs: number[] = f[b]?.[key] ?? [];
      return as.length && bs.length ? `${as.map((x, i) => `${fmt(x)} ÷ ${fmt(bs[i])}`).join(', ')}${unit}` : '—';
    };
    rows.push(
      `| | worker stream tasks/s ÷ the default equal-work peer's (the median of the rounds') | ${showRatio(pr.stream_per_s_vs_default_equal, '')} | ${pairs('stream', 'default-equal', 'rounds_per_s', ' tasks/s')} | ≥ 1.2 |`,
      `| | worker stream CPU per task ÷ the default equal-work peer's (the machine's) | ${showRatio(pr.stream_cpu_vs_default_equal)} | ${pairs('stream', 'default-equal', 'rounds_machine_ms_per_task', ' ms')} | ≤ 1× |`,
      `| | worker stream CPU per task ÷ the batched equal-work peer's (the machine's; the processes' counted) | ${showRatio(pr.stream_cpu_vs_batched_equal)} (${showRatio(pr.stream_counted_cpu_vs_batched_equal)}) | ${pairs('stream', 'batched-equal', 'rounds_machine_ms_per_task', ' ms')} | a batched lane: ≤ 3× |`,
      `| | claim + complete (Taskcluster's calls) tasks/s ÷ the default equal-work peer's | ${showRatio(pr.claim_complete_per_s_vs_default_equal, '')} | ${pairs('claim_complete', 'default-equal', 'rounds_per_s', ' tasks/s')} | |`,
    );
    if (f['lane-floor-500']) {
      rows.push(
        `| | the batched lane's floor (500 a batch) CPU per task ÷ the batched equal-work peer's (the machine's; the processes' counted) | ${showRatio(pr.lane_floor_cpu_vs_batched_equal)} (${showRatio(pr.lane_floor_counted_cpu_vs_batched_equal)}) | ${pairs('lane-floor-500', 'batched-equal', 'rounds_machine_ms_per_task', ' ms')}; counted ${pairs('lane-floor-500', 'batched-equal', 'rounds_counted_ms_per_task', ' ms')} | if above 3×, no design under the rules reaches the batched lane's goal |`,
        `| | worker stream CPU per task ÷ the batched lane's floor (the machine's; the processes' counted) | ${showRatio(pr.stream_cpu_vs_lane_floor)} (${showRatio(pr.stream_counted_cpu_vs_lane_floor)}) | ${pairs('stream', 'lane-floor-500', 'rounds_machine_ms_per_task', ' ms')}; counted ${pairs('stream', 'lane-floor-500', 'rounds_counted_ms_per_task', ' ms')} | |`,
      );
    }
  }
  if (s) {
    rows.push(`| | 100k graph submit, CPU per task | ${fmt(s.cpu_ms_per_task_submit?.total, ' ms')} (${fmt(s.submit_s, ' s')}) | | ≤ 0.25 ms, < 20 s |`);
  }
  if (h) {
    rows.push(`| | hop p50 ÷ its floor (signal → activity → UPDATE) | ${showRatio(ratio(h.p50_ms, h.floor_p50_ms))} | ${fmt(h.p50_ms, ' ms')} ÷ ${fmt(h.floor_p50_ms, ' ms')} | ≤ 1.2× |`);
  }
  // the first row names the group
  if (rows.length > 0) rows[0] = rows[0].replace(/^\| \|/, '| ratios to this run\'s floors |');
  return rows;
}
