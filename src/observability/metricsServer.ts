import { createServer, type Server } from 'node:http';
import type { Logger } from 'pino';
import { registry } from './metrics.js';

export interface MetricsServer {
  /** http://host:port */
  url: string;
  port: number;
  close(): Promise<void>;
}

/** Where the Temporal SDK's own Prometheus exporter serves (src/temporal/runtime.ts), once installed. */
let temporalMetricsUrl: string | undefined;
export function setTemporalMetricsUrl(url: string | undefined): void {
  temporalMetricsUrl = url;
}

/**
 * The Temporal SDK's text (workflow task / activity metrics of the worker in this process), fetched from its
 * exporter on 127.0.0.1, so one scrape returns both. Its names all start with `temporal_`, so they never
 * collide with prom-client's.
 */
async function temporalText(log: Logger): Promise<string> {
  if (!temporalMetricsUrl) return '';
  try {
    const res = await fetch(temporalMetricsUrl, { signal: AbortSignal.timeout(2000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const text = await res.text();
    return text.endsWith('\n') || text === '' ? text : `${text}\n`;
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'metrics: the Temporal SDK exporter did not answer');
    return '';
  }
}

/**
 * The process's own small HTTP server (not the API's: relay, bridge and scheduler worker serve no API, and
 * the API's port may be public): `GET /metrics` in Prometheus text format, `GET /health` for container
 * health checks (200 while the process runs its event loop).
 */
export async function startMetricsServer(options: { port: number; host: string; log: Logger }): Promise<MetricsServer> {
  const { log } = options;
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' }).end(JSON.stringify({ code: 'MethodNotAllowed', message: `${req.method} is not served here` }));
      return;
    }
    if (path === '/health') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'ResourceNotFound', message: 'Only /metrics and /health are served here' }));
      return;
    }
    Promise.all([registry.metrics(), temporalText(log)]).then(
      ([own, temporal]) => res.writeHead(200, { 'content-type': registry.contentType }).end(req.method === 'HEAD' ? undefined : own + temporal),
      (err: unknown) => {
        log.error({ err: (err as Error).message }, 'metrics: collecting failed');
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'InternalServerError', message: 'collecting metrics failed' }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  log.info({ port }, `metrics on http://${host}:${port}/metrics`);
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
