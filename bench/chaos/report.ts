import type { ChaosResult } from './harness.js';

const kv = (o: Record<string, number>) => Object.entries(o).map(([k, v]) => `${k} ${v}`).join(', ') || '0';

/** The per-fault table and the checks, as docs/reliability.md shows them. */
export function renderChaosTable(r: ChaosResult): string {
  const lines = [
    `${r.graphs} graphs, ${r.tasks} tasks, ${r.seconds} s; ${r.machine.nproc} × ${r.machine.cpuModel}, ${r.machine.memGiB} GiB; Node ${r.machine.node}, Postgres ${r.machine.postgres}, RabbitMQ ${r.machine.rabbitmq}, ${String(r.machine.temporal).split('\n')[0]}`,
    '',
    '| fault | down (ms) | restarted process ready (ms) | progress again (ms) | duplicates | runs added | lost | unclean answers to workers |',
    '|---|---|---|---|---|---|---|---|',
    ...r.faults.map((f) => `| ${f.fault}${f.gracefulExitMs !== undefined ? ` (exit after ${f.gracefulExitMs} ms)` : ''} | ${f.downMs} | ${f.readyAfterMs ?? '-'} | ${f.progressMs ?? 'none'} | ${f.duplicates} | ${kv(f.runsAdded)} | ${f.lost} | ${kv(f.requestErrors)} |`),
    '',
    '| check | checked | result |',
    '|---|---|---|',
    ...r.checks.map((c) => `| ${c.name} | ${c.checked} | ${c.ok ? 'ok' : `FAILED (${c.failed}): ${c.failures.slice(0, 3).join('; ').replace(/\|/g, '/')}`} |`),
  ];
  return lines.join('\n');
}
