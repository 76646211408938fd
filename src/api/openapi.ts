import type { Endpoint, ServiceName } from './endpoint.js';
import { formatExpression } from '../auth/scopes.js';

/** An OpenAPI 3 document generated from the endpoint declarations, served at `/api/<service>/v1/openapi.json`. */
export function openApiDocument(service: ServiceName, rootUrl: string, endpoints: Endpoint[]) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const e of endpoints) {
    const path = e.route.replace(/<([a-zA-Z]+)\*?>/g, '{$1}');
    paths[path] ??= {};
    paths[path][e.method] = {
      operationId: e.name,
      summary: e.title,
      description: e.scopes ? `${e.description}\n\nScopes: ${formatExpression(e.scopes)}` : e.description,
      parameters: [
        ...[...e.route.matchAll(/<([a-zA-Z]+)\*?>/g)].map((m) => ({
          name: m[1],
          in: 'path',
          required: true,
          schema: { type: 'string', ...(e.params?.[m[1]] ? { pattern: e.params[m[1]].source } : {}) },
        })),
        ...Object.entries(e.query ?? {}).map(([name, pattern]) => ({
          name,
          in: 'query',
          required: false,
          schema: { type: 'string', pattern: pattern.source },
        })),
      ],
      ...(e.input ? { requestBody: { required: true, content: { 'application/json': { schema: e.input } } } } : {}),
      responses: {
        200: { description: 'Success', content: { 'application/json': { schema: e.output ?? {} } } },
        default: { description: "Error in Taskcluster's shape {code, message, requestInfo}" },
      },
    };
  }
  return {
    openapi: '3.0.3',
    info: { title: `tgs ${service} API`, version: 'v1' },
    servers: [{ url: `${rootUrl}/api/${service}/v1` }],
    paths,
  };
}
