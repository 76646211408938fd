import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { registry } from '../../src/observability/metrics.js';

// docs/operations.md and the Grafana dashboard name metrics by hand: they must name ones that exist, and all of them.
const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
const dashboard = JSON.parse(readFileSync(new URL('../../docs/grafana-dashboard.json', import.meta.url), 'utf8')) as {
  panels: { title: string; targets: { expr: string }[] }[];
};
const registered = new Set(registry.getMetricsAsArray().map((m) => m.name));
const base = (name: string) => name.replace(/_(bucket|count|sum)$/, '');

test('every tgs metric is documented in docs/operations.md', () => {
  const tgs = [...registered].filter((n) => n.startsWith('tgs_'));
  assert.ok(tgs.length >= 15, tgs.join(' '));
  for (const name of tgs) assert.ok(doc.includes(`\`${name}\``), `${name} is not in docs/operations.md`);
});

test('the alerts and the dashboard use only metrics tgs serves', () => {
  const exprs = [...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)), ...[...doc.matchAll(/expr: (.+)/g)].map((m) => m[1])];
  assert.ok(exprs.length >= 20);
  const used = new Set(exprs.flatMap((e) => [...e.matchAll(/\btgs_[a-z_]+/g)].map((m) => base(m[0]))));
  for (const name of used) assert.ok(registered.has(name), `${name} is used but not served`);
  // the dashboard covers each concern the operator watches
  for (const name of ['tgs_http_request_duration_seconds', 'tgs_queue_pending_tasks', 'tgs_graph_hop_seconds', 'tgs_graph_signal_lag_seconds', 'tgs_outbox_oldest_age_seconds', 'tgs_task_graphs']) {
    assert.ok(dashboard.panels.some((p) => p.targets.some((t) => t.expr.includes(name))), `no panel shows ${name}`);
  }
  assert.ok(dashboard.panels.some((p) => p.targets.some((t) => t.expr.includes('temporal_workflow_task_'))), 'a Temporal SDK panel');
});
