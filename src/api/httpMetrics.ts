import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Histogram } from 'prom-client';
import type { Endpoint } from './endpoint.js';
import { servedPaths } from './server.js';
import { httpDuration } from '../observability/metrics.js';

type Child = Histogram.Internal<'service' | 'method' | 'status'>;

interface RouteLabels {
  service: string;
  method: string;
  /** histogram children by status code, made on first use: a request resolves its labels without allocating */
  byStatus: Child[];
}

const labels = (service: string, method: string): RouteLabels => ({ service, method, byStatus: [] });

/**
 * Times every API request into tgs_http_request_duration_seconds, labelled with the endpoint's Taskcluster
 * name (claimWork, reportCompleted, ...), and logs each one at debug level (5xx at error). The route's
 * labels are found by its registered path and verb (two Map lookups on strings fastify already holds);
 * fastify measures the elapsed time itself.
 */
export function registerHttpMetrics(app: FastifyInstance, endpoints: Endpoint[], log?: FastifyBaseLogger): void {
  const byRoute = new Map<string, Map<string, RouteLabels>>();
  for (const endpoint of endpoints) {
    for (const route of [endpoint.route, ...(endpoint.aliases ?? [])]) {
      for (const url of servedPaths(endpoint, route)) {
        const verbs = byRoute.get(url) ?? new Map<string, RouteLabels>();
        verbs.set(endpoint.method.toUpperCase(), labels(endpoint.service, endpoint.name));
        byRoute.set(url, verbs);
      }
    }
  }
  const other = labels('other', 'other');
  const notFound = labels('other', 'notFound');
  const debug = log !== undefined && ['debug', 'trace'].includes(log.level);

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions;
    const found = route.url === undefined ? notFound : (byRoute.get(route.url)?.get(request.method) ?? other);
    const status = reply.statusCode;
    const seconds = reply.elapsedTime / 1000;
    const child = (found.byStatus[status] ??= httpDuration.labels(found.service, found.method, String(status)));
    child.observe(seconds);
    if (log) {
      if (status >= 500) request.log.error({ method: found.method, status, ms: reply.elapsedTime }, 'request failed');
      else if (debug) request.log.debug({ method: found.method, status, ms: reply.elapsedTime }, 'request');
    }
    done();
  });
}
