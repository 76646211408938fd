import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AuthContext, ClientStore } from '../auth/authenticate.js';
import type { ScopeExpression } from '../auth/scopes.js';
import type { Config } from '../config.js';
import type { ApiDeps } from './deps.js';
import type { ConcurrencyClass } from './concurrency.js';
import { ROUTE_PARAMS } from './patterns.js';

export type JsonSchema = Record<string, unknown>;
export type HttpMethod = 'get' | 'put' | 'post' | 'delete';
export type ServiceName = 'queue' | 'scheduler' | 'auth' | 'index' | 'hooks';

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
  /**
   * For a request that asks to become a WebSocket (`Upgrade: websocket`) and reached this handler (its
   * parameters, credentials and declared scopes checked): the socket and the bytes read past the request's
   * head. A handler that takes it over returns UPGRADED. Undefined for every other request.
   */
  upgrade?: UpgradeRequest;
}

/** A request's socket, handed over for a WebSocket (src/api/upgrade.ts). */
export interface UpgradeRequest {
  socket: import('node:stream').Duplex;
  head: Buffer;
}

/** What a handler returns once it took a request's socket over (ctx.upgrade): nothing more is sent. */
export const UPGRADED = Symbol('upgraded');

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
  /**
   * The route's last parameter, when it may be left out (Taskcluster's `{/:name}`, the index's lists of the root
   * namespace): the route is served without its `/<name>` too, the parameter then `''`.
   */
  optionalParam?: string;
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
  /**
   * Bodies over this size (bytes) get 413 InputTooLarge, before more is read. Defaults (src/api/bodyLimits.ts):
   * 64 KiB with an `input`, 1 KiB without; an endpoint that needs more says why next to its number.
   */
  bodyLimit?: number | ((config: Config) => number);
  /**
   * Accept any content type and hand the handler the body as a stream (`ctx.body`, undefined when there is
   * none), never buffered by the framework (artifact upload). The handler enforces its own size limit.
   */
  rawBody?: boolean;
  /**
   * Read the JSON body as a stream of members instead of parsing it whole (src/api/jsonObjectStream.ts):
   * `ctx.body` is an async iterable of them, with the members of each key in `expand` yielded one by one
   * (createTaskGraph's `tasks`). `bodyLimit` and a Hawk payload hash are enforced as it is read; `input` is
   * then only documentation, the handler validates.
   */
  streamJson?: { expand: string[]; maxMemberBytes: number };
  /**
   * Checks that need only the URL, run before a byte of the body is read (a signed upload URL's signature and
   * expiry). Throw a TgsError to refuse.
   */
  beforeBody?(ctx: { params: Record<string, string>; query: Record<string, string | undefined>; deps: ApiDeps; request: FastifyRequest }): void;
  /**
   * Requests the handler serves without scopes although `scopes` is declared (public artifacts): the framework
   * does not refuse anonymous callers of these before the handler runs.
   */
  isPublic?(params: Record<string, string>): boolean;
  /**
   * Authenticate this endpoint's requests against these clients instead of the deployment's: Taskcluster's test
   * endpoints (testAuthenticate), whose fixed test clients' scopes the body may name. The credentials are checked
   * once the body is read and validated (its payload hash too), by the rules every request is checked by; with
   * `expand` in place of the roles. Such an endpoint declares no `scopes`: its handler checks what it requires.
   */
  ownClients?(body: Body): OwnClients;
  /** A per-process cap on requests in flight for expensive reads (src/api/concurrency.ts); beyond it 429. */
  concurrency?: ConcurrencyClass;
  handler(ctx: EndpointContext<Body>): Promise<unknown>;
}

/** The clients an endpoint with `ownClients` authenticates against, and what their scopes grant. */
export interface OwnClients {
  store: ClientStore;
  expand(scopes: string[]): Promise<string[]>;
}

/** Helper that keeps the body type. */
/**
 * An endpoint, with a pattern for every route parameter that src/api/patterns.ts' ROUTE_PARAMS names and the
 * declaration does not override.
 */
export function declare<Body = any>(endpoint: Endpoint<Body>): Endpoint<Body> {
  if (endpoint.optionalParam !== undefined && !endpoint.route.endsWith(`/<${endpoint.optionalParam}>`)) {
    throw new Error(`${endpoint.name}: optionalParam ${endpoint.optionalParam} must be the last parameter of ${endpoint.route}`);
  }
  const params: Record<string, RegExp> = {};
  for (const route of [endpoint.route, ...(endpoint.aliases ?? [])]) {
    for (const [, name] of route.matchAll(/<([A-Za-z]+)\*?>/g)) if (ROUTE_PARAMS[name]) params[name] = ROUTE_PARAMS[name];
  }
  return { ...endpoint, params: { ...params, ...endpoint.params } };
}
