import { DefaultLogger, Runtime, type LogEntry } from '@temporalio/worker';
import type { LogLevel } from '@temporalio/common';
import type { Logger } from 'pino';
import { freePort } from './devServer.js';
import { setTemporalMetricsUrl } from '../observability/metricsServer.js';

const PINO_LEVEL: Record<LogLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' };
const TEMPORAL_LEVEL: Record<string, LogLevel> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR', fatal: 'ERROR', silent: 'ERROR' };

/**
 * The Temporal SDK's log entries as pino lines. Its `runId` is a workflow run's id, which would read as a
 * task's runId in tgs logs: it becomes `workflowRunId`, and a graph workflow's id also gives `taskGraphId`.
 */
export function temporalLogFunction(log: Logger): (entry: LogEntry) => void {
  return (entry) => {
    const { runId, workflowId, ...meta } = (entry.meta ?? {}) as Record<string, unknown>;
    const fields: Record<string, unknown> = { ...meta };
    if (runId !== undefined) fields.workflowRunId = runId;
    if (workflowId !== undefined) {
      fields.workflowId = workflowId;
      const graph = /^task-graph\/(.+)$/.exec(String(workflowId));
      if (graph) fields.taskGraphId = graph[1];
    }
    log[PINO_LEVEL[entry.level]](fields, entry.message);
  };
}

/**
 * Installs the Temporal SDK runtime of this process (once, before any worker connection): its logs go
 * through `log` (at `minLevel` or above, TGS_LOG_LEVEL by default), and with `metrics` its own Prometheus
 * exporter serves workflow task and activity metrics on 127.0.0.1 at a free port, which the metrics server
 * appends to /metrics. `minLevel` lets tgs dev keep the worker's bundling chatter out of its terminal.
 */
export async function installTemporalRuntime(options: { log: Logger; metrics: boolean; minLevel?: string }): Promise<void> {
  const level = TEMPORAL_LEVEL[options.minLevel ?? options.log.level] ?? 'INFO';
  const port = options.metrics ? await freePort() : undefined;
  Runtime.install({
    logger: new DefaultLogger(level, temporalLogFunction(options.log)),
    ...(port !== undefined ? { telemetryOptions: { metrics: { prometheus: { bindAddress: `127.0.0.1:${port}` } } } } : {}),
  });
  if (port !== undefined) setTemporalMetricsUrl(`http://127.0.0.1:${port}/metrics`);
}
