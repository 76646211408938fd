import { test } from 'node:test';
import assert from 'node:assert/strict';
import { summarize } from '../../bench/scenarios/peer.js';

const f = (perS: number, machine: number, counted: number) => ({ per_s: perS, machine_ms_per_task: machine, cpu_ms_per_task: { total: counted } });

test('the peer scenario\'s summary: each drain\'s median over the rounds, the ratios the medians of the rounds\' ratios', () => {
  const rounds = [
    { stream: f(3000, 0.6, 0.5), 'default-equal': f(4000, 0.4, 0.35), 'batched-equal': f(40000, 0.05, 0.04) },
    { stream: f(3600, 0.5, 0.45), 'default-equal': f(3000, 0.5, 0.4), 'batched-equal': f(30000, 0.04, 0.03) },
    { stream: f(3300, 0.55, 0.5), 'default-equal': f(3300, 0.45, 0.4), 'batched-equal': f(36000, 0.05, 0.05) },
  ];
  const { figures, ratios } = summarize(rounds);
  assert.equal(figures.stream.per_s, 3300);
  assert.deepEqual(figures.stream.rounds_per_s, [3000, 3600, 3300]);
  assert.equal(figures.stream.machine_ms_per_task, 0.55);
  assert.equal(figures.stream.cpu_ms_per_task.total, 0.5, 'the CPU by process of the round with the median tasks a second');
  // the rounds' stream ÷ default-equal: 0.75, 1.2, 1.0 → 1.0 (not 3300 ÷ 3300 by chance: the median of ratios)
  assert.equal(ratios.stream_per_s_vs_default_equal, 1);
  // 0.6 / 0.05 = 12, 0.5 / 0.04 = 12.5, 0.55 / 0.05 = 11 → 12
  assert.equal(ratios.stream_cpu_vs_batched_equal, 12);
  assert.equal(ratios.claim_complete_per_s_vs_default_equal, undefined, 'a drain not measured gives no ratio');
  assert.equal(ratios.lane_floor_cpu_vs_batched_equal, undefined, 'no floor measured, no ratio to it');
});

test('the batched lane\'s floor (500 a batch) against the batched equal-work peer, and the stream against the floor', () => {
  const rounds = [
    { stream: f(3000, 0.6, 0.5), 'batched-equal': f(30000, 0.05, 0.04), 'lane-floor-500': f(4000, 0.2, 0.3), 'lane-floor-100': f(3000, 0.4, 0.5) },
    { stream: f(3200, 0.5, 0.5), 'batched-equal': f(30000, 0.04, 0.05), 'lane-floor-500': f(4000, 0.25, 0.2), 'lane-floor-100': f(3000, 0.4, 0.5) },
  ];
  const { figures, ratios } = summarize(rounds);
  assert.deepEqual(figures['lane-floor-500'].rounds_machine_ms_per_task, [0.2, 0.25]);
  assert.deepEqual(figures['lane-floor-500'].rounds_counted_ms_per_task, [0.3, 0.2]);
  // 0.2 / 0.05 = 4, 0.25 / 0.04 = 6.25 → the lower of two: 4; counted 0.3 / 0.04 = 7.5, 0.2 / 0.05 = 4 → 4
  assert.equal(ratios.lane_floor_cpu_vs_batched_equal, 4);
  assert.equal(ratios.lane_floor_counted_cpu_vs_batched_equal, 4);
  // 0.6 / 0.2 = 3, 0.5 / 0.25 = 2 → 2 (not the 100-a-batch floor's 1.5 or 1.25)
  assert.equal(ratios.stream_cpu_vs_lane_floor, 2);
  assert.equal(ratios.stream_counted_cpu_vs_lane_floor, 1.67);
});
