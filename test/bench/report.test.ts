import { test } from 'node:test';
import assert from 'node:assert/strict';
import { peerRows, ratioRows } from '../../bench/report.js';
import { clientBackendDatabase, isBenchRabbitmq } from '../../bench/cpu.js';

test('the ratios row of the bench table divides each figure by the floor measured in the same run', () => {
  const rows = ratioRows({
    machine: { cpus: 2 },
    throughput: { tasks_per_s: 450, cpu_ms_per_task: { total: 4 } },
    queue: { claim_complete_batch8_per_s: 600, floor_per_s: 1200, cpu_ms_per_task_floor: { total: 1.6 } },
    scale: { submit_s: 18, cpu_ms_per_task_submit: { total: 0.3 } },
    hop: { p50_ms: 12, floor_p50_ms: 10 },
  });
  assert.equal(rows.length, 5);
  assert.match(rows[0], /^\| ratios to this run's floors \| 10k graph CPU per task .* \| 2\.50× \| 4 ms ÷ 1\.6 ms \| ≤ 2× \|$/);
  // 2 cores at 4 ms a task allow 500 tasks/s
  assert.match(rows[1], /\| 0\.90 \| 450 ÷ 500 \| ≥ 0\.9 \|$/);
  assert.match(rows[2], /\| 0\.50 \| 600 ÷ 1200 tasks\/s \| ≥ 0\.6 \|$/);
  assert.match(rows[3], /0\.3 ms \(18 s\)/);
  assert.match(rows[4], /\| 1\.20× \| 12 ms ÷ 10 ms \| ≤ 1\.2× \|$/);
  assert.deepEqual(ratioRows({}), [], 'scenarios not run give no rows');
});

test('claim + complete against its floor in alternated rounds: the median of the rounds\' ratios, each round shown', () => {
  const [row] = ratioRows({
    queue: {
      claim_complete_batch8_per_s: 1300, floor_per_s: 2400, claim_complete_floor_ratio: 0.62,
      claim_complete_batch8_rounds_per_s: [1300, 1500, 1100], floor_rounds_per_s: [2100, 2400, 2600],
    },
  });
  assert.match(row, /\| 0\.62 \| the median of 3 rounds alternated: 1300 ÷ 2100, 1500 ÷ 2400, 1100 ÷ 2600 tasks\/s \| ≥ 0\.6 \|$/);
});

test('claim + complete by CPU a task, the server\'s processes only: the caller\'s share left out of the drain\'s', () => {
  const rows = ratioRows({
    queue: {
      claim_complete_batch8_per_s: 1300, floor_per_s: 2400,
      cpu_ms_per_task_batch8: { total: 1.2, 'bench (fast worker)': 0.3, 'tgs api': 0.5, postgres: 0.4 },
      cpu_ms_per_task_floor: { total: 0.54 },
    },
  });
  assert.match(rows[1], /the server's processes only \| 0\.60 \| 0\.54 ms ÷ 0\.9 ms \(1\.2 ms less the caller's 0\.3 ms\) \| ≥ 0\.6 \|$/);
  // in one process the caller cannot be told apart: no row
  assert.equal(ratioRows({ queue: { claim_complete_batch8_per_s: 1300, floor_per_s: 2400, cpu_ms_per_task_batch8: { total: 1.2, 'tgs (all) + bench': 1.2 }, cpu_ms_per_task_floor: { total: 0.54 } } }).length, 1);
});

test('the peer scenario\'s rows: each drain\'s figures, then the ratios of the worker stream to the equal-work peers', () => {
  const figures = (perS: number, machine: number) => ({ per_s: perS, machine_ms_per_task: machine, rounds_per_s: [perS], rounds_machine_ms_per_task: [machine], cpu_ms_per_task: { total: machine / 2 } });
  const peer = {
    jobs: 20000, peer_version: '0.17.3',
    figures: { stream: figures(3600, 0.5), 'default-equal': figures(4000, 0.4), 'batched-equal': figures(40000, 0.04) },
    ratios: { stream_per_s_vs_default_equal: 0.9, stream_cpu_vs_default_equal: 1.25, stream_cpu_vs_batched_equal: 12.5, stream_counted_cpu_vs_batched_equal: 12.5, claim_complete_per_s_vs_default_equal: undefined },
  };
  const table = peerRows(peer);
  assert.equal(table.length, 4, 'a heading and the three drains measured (the others were not)');
  assert.match(table[1], /worker stream .* \| 3600 tasks\/s \(3600\); 0\.5 ms \(0\.5\) \| CPU per task 0\.25 ms/);
  const rows = ratioRows({ peer });
  assert.match(rows[0], /^\| ratios to this run's floors \| worker stream tasks\/s ÷ the default equal-work peer's .* \| 0\.90 \| 3600 ÷ 4000 tasks\/s \| ≥ 1\.2 \|$/);
  assert.match(rows[1], /\| 1\.25× \| 0\.5 ÷ 0\.4 ms \| ≤ 1× \|$/);
  assert.match(rows[2], /\| 12\.50× \(12\.50×\) \| 0\.5 ÷ 0\.04 ms \| a batched lane: ≤ 3× \|$/);
  assert.match(rows[3], /\| — \| — \| \|$/, 'a drain not measured shows a dash');
  assert.equal(rows.length, 4, 'no floor measured: no rows of it');
});

test('the peer scenario\'s rows with the batched lane\'s floor: its counts, RabbitMQ a message, and its ratios', () => {
  const figures = (perS: number, machine: number) => ({ per_s: perS, machine_ms_per_task: machine, rounds_per_s: [perS], rounds_machine_ms_per_task: [machine], rounds_counted_ms_per_task: [machine / 2], cpu_ms_per_task: { total: machine / 2 } });
  const floor = { ...figures(5000, 0.3), per_task: { pg_transactions: 0.02, pg_rows_written: 6, messages: 2 }, rabbitmq_ms_per_message: { unrouted: 0.02, quorum_queued_extra: 0.09 } };
  const peer = {
    jobs: 20000, peer_version: '0.17.3',
    figures: { stream: figures(3600, 0.6), 'batched-equal': figures(30000, 0.06), 'lane-floor-500': floor },
    ratios: { lane_floor_cpu_vs_batched_equal: 5, lane_floor_counted_cpu_vs_batched_equal: 5, stream_cpu_vs_lane_floor: 2, stream_counted_cpu_vs_lane_floor: 2 },
  };
  const table = peerRows(peer);
  assert.match(table[3], /floor, 500 a batch .* \| 5000 tasks\/s \(5000\); 0\.3 ms \(0\.3\) \| CPU per task 0\.15 ms: ; 0\.02, 6, 2 messages; RabbitMQ a message 0\.02 ms routed to no queue, 0\.09 ms more into the quorum queue \| \|$/);
  const rows = ratioRows({ peer });
  assert.match(rows.at(-2) as string, /floor \(500 a batch\) CPU per task ÷ the batched equal-work peer's .* \| 5\.00× \(5\.00×\) \| 0\.3 ÷ 0\.06 ms; counted 0\.15 ÷ 0\.03 ms \| if above 3×/);
  assert.match(rows.at(-1) as string, /worker stream CPU per task ÷ the batched lane's floor .* \| 2\.00× \(2\.00×\) \| 0\.6 ÷ 0\.3 ms; counted 0\.3 ÷ 0\.15 ms \| \|$/);
});

test('Postgres client backends are told apart by database, the server\'s own processes are not', () => {
  assert.equal(clientBackendDatabase('postgres: 15/main: postgres tgs_test_1_ab [local] idle '), 'tgs_test_1_ab');
  assert.equal(clientBackendDatabase('postgres: 15/main: postgres tgs_bench_peer_9 127.0.0.1(33846) UPDATE'), 'tgs_bench_peer_9');
  assert.equal(clientBackendDatabase('postgres: 15/main: walwriter '), undefined);
  assert.equal(clientBackendDatabase('postgres: 15/main: logical replication launcher '), undefined);
  assert.equal(clientBackendDatabase('postgres: 15/main: parallel worker for PID 12 '), undefined);
});

test('RabbitMQ\'s CPU is the bench\'s node\'s: not a rabbitmqctl call\'s Erlang VM, nor a node of the chaos cluster', () => {
  const server = '/usr/lib/erlang/erts-13.1.5/bin/beam.smp -W w -MBas ageffcbf -B i -- -root /usr/lib/erlang -progname erl -- -home /var/lib/rabbitmq -- -pa  -noshell -noinput -s rabbit boot -boot start_sasl';
  const cli = '/usr/lib/erlang/erts-13.1.5/bin/beam.smp -B -- -root /usr/lib/erlang -progname erl -- -home /var/lib/rabbitmq -- -boot start_clean -noshell -hidden -run escript start -escript main rabbitmqctl_escript -- -extra /usr/lib/rabbitmq/lib/rabbitmq_server-3.10.8/escript/rabbitmqctl status';
  const chaosNode = `${server} -mnesia dir "/tmp/tgs-rabbitmq-cluster/n2/mnesia"`;
  assert.equal(isBenchRabbitmq(server), true);
  assert.equal(isBenchRabbitmq(cli), false);
  assert.equal(isBenchRabbitmq(chaosNode), false);
  assert.equal(isBenchRabbitmq('node bin/tgs.js relay --rabbit'), false);
});
