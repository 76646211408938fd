import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext } from '../auth/authenticate.js';
import type { ScopeExpression } from '../auth/scopes.js';
import type { ApiDeps } from './deps.js';

export type JsonSchema = Record<string, unknown>;
export type HttpMethod = 'get' | 'put' | 'post' | 'delete';
export type ServiceName = 'queue' | 'scheduler' | 'auth';

export interface EndpointContext<Body = any> {
  /** Route parameters, already checked against the endpoint's `params` patterns. */
  params: Record<string, string>;
  /** Query parameters, checked against the endpoint's `query` patterns. */
  query: Record<string, string | undefined>;
  /** The request body, validated against `input` (defaults filled in). */
  body: Body;
  auth: AuthContext;
  /**
   * Renders the declared `scopes` with these parameters (route params are included automatically)
   * and throws 403 InsufficientScopes when the caller lacks them.
   */
  authorize(params?: Record<string, unknown>): void;
  /**
   * Checks a concrete expression built by the handler (e.g. from a request body) and counts as the
   * endpoint's scope check; throws 403 InsufficientScopes naming what is missing.
   */
  authorizeExpression(expr: ScopeExpression): void;
  /** Whether the caller satisfies an expression (no throw). */
  satisfies(expr: ScopeExpression): boolean;
  deps: ApiDeps;
  request: FastifyRequest;
  reply: FastifyReply;
}

/** A handler may return a body (sent as JSON with 200) or a RawReply for redirects and bytes. */
export class RawReply {
  constructor(
    readonly status: number,
    readonly headers: Record<string, string>,
    readonly body?: Buffer | string | NodeJS.ReadableStream,
  ) {}
}

export interface Endpoint<Body = any> {
  service: ServiceName;
  /** Taskcluster's method name, e.g. `createTask`; also the OpenAPI operationId. */
  name: string;
  title: string;
  description: string;
  method: HttpMethod;
  /** Taskcluster-style route, e.g. `/task/<taskId>/runs/<runId>/reclaim`. */
  route: string;
  /** Extra routes served by the same handler (e.g. a `%2F`-encoded taskQueueId form). */
  aliases?: string[];
  /** A regular expression each route parameter must match. */
  params?: Record<string, RegExp>;
  /** Allowed query parameters, each with a regular expression. */
  query?: Record<string, RegExp>;
  /**
   * Scope template. When every parameter it mentions is a route parameter, the framework checks it
   * before the handler runs; otherwise the handler must call ctx.authorize(...) itself.
   */
  scopes?: ScopeExpression;
  input?: JsonSchema;
  output?: JsonSchema;
  /** Bodies over this size (bytes) get 413 InputTooLarge; default 10 MiB. */
  bodyLimit?: number;
  /** Accept any content type and leave the raw body to the handler (artifact upload). */
  rawBody?: boolean;
  handler(ctx: EndpointContext<Body>): Promise<unknown>;
}

/** Helper that keeps the body type. */
export function declare<Body = any>(endpoint: Endpoint<Body>): Endpoint<Body> {
  return endpoint;
}
