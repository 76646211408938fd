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
});
