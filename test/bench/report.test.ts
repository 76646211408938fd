import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ratioRows } from '../../bench/report.js';

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
