import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { text as streamText } from 'node:stream/consumers';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { TgsError } from '../errors.js';
import { OutageLog } from '../outageLog.js';
import { createAuthenticator, TIMESTAMP_SKEW_SECONDS, type Authenticated, type RequestForAuth } from '../auth/authenticate.js';
import { NonceCache } from '../auth/nonceCache.js';
import { requireScopes } from '../auth/requireScopes.js';
import {
  expressionSatisfied,
  knownPart,
  renderExpression,
  unsatisfiablePart,
  templateParameters,
  type ScopeExpression,
} from '../auth/scopes.js';
import type { ApiDeps } from './deps.js';
import { RawReply, UPGRADED, type Endpoint, type EndpointContext } from './endpoint.js';
import { routeUpgrades, upgradeOf } from './upgrade.js';
import { compile, describeErrors, unstorableString, validateInput } from './validate.js';
import { openApiDocument } from './openapi.js';
import { DEFAULT_BODY_LIMIT, NO_INPUT_BODY_LIMIT, SERVER_BODY_LIMIT } from './bodyLimits.js';
import { concurrencyLimits, RETRY_AFTER_SECONDS } from './concurrency.js';
import { objectMembers } from './jsonObjectStream.js';
import { errorBody, toTgsError } from './errorReply.js';
import { bodyTooLarge, StreamedBody } from './streamedBody.js';
import { SLUGID } from './patterns.js';

/** What the onRequest hook established before the body was read. */
interface Admitted {
  params: Record<string, string>;
  query: Record<string, string | undefined>;
  authenticated: Authenticated;
  /** The declared scopes were checked in full (they mention only route parameters). */
  authorized: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    rawBody?: string;
    admitted?: Admitted;
  }
}

/** `/task/<taskId>` → `/task/:taskId`; a trailing `<name*>` matches the rest of the path, slashes included. */
export function fastifyPath(route: string): string {
  return route.replace(/<([a-zA-Z]+)>/g, ':$1').replace(/<[a-zA-Z]+\*>$/, '*');
}

const wildcardParam = (route: string) => /<([a-zA-Z]+)\*>$/.exec(route)?.[1];

/**
 * Every path fastify serves a route of `endpoint` at (`route` one of its route and aliases). Taskcluster's express
 * router is not strict: a path answers with and without a trailing slash (the Python client strips it, `/roles/` is
 * called as `/roles`). A wildcard route takes the trailing slash into its parameter, as express does. A route
 * whose last parameter is optional (Endpoint.optionalParam) is served without it as well.
 */
export function servedPaths(endpoint: Endpoint, route: string): string[] {
  const base = `/api/${endpoint.service}/v1`;
  const forms = [route];
  if (endpoint.optionalParam !== undefined && route.endsWith(`/<${endpoint.optionalParam}>`)) {
    forms.push(route.slice(0, -`/<${endpoint.optionalParam}>`.length));
  }
  const paths = new Set<string>();
  for (const form of forms) {
    const path = base + fastifyPath(form);
    if (wildcardParam(form)) {
      paths.add(path);
      continue;
    }
    const bare = path.replace(/\/+$/, '');
    paths.add(bare).add(`${bare}/`);
  }
  return [...paths];
}

/**
 * How long a connection may go on sending the body of a refused request. Node discards (never stores) such a
 * body after the reply so the connection can be reused; closing at once instead would reset the connection
 * and clients still sending would lose the reply. Past this the connection is closed.
 */
const REFUSED_BODY_LINGER_MS = 5000;

function lingerRefusedBody(request: FastifyRequest, reply: FastifyReply): void {
  const socket = request.raw.socket as typeof request.raw.socket | null;
  if (!socket) return;
  reply.raw.once('finish', () => {
    const timer = setTimeout(() => socket.destroy(), REFUSED_BODY_LINGER_MS);
    timer.unref();
    request.raw.once('end', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
  });
}

const loggedServers = new WeakSet<FastifyInstance>();
/** Per API server: the outage of its database, logged once when requests start failing and once when it is back. */
const postgresOutages = new WeakMap<FastifyInstance, OutageLog>();

/** Sends a TgsError; a refusal before the body was read never reads it (see lingerRefusedBody). */
function sendError(reply: FastifyReply, request: FastifyRequest, err: unknown, endpoint?: Endpoint): FastifyReply {
  const tgsError = toTgsError(err);
  // Postgres refusing or ending sessions: one line when it starts and one when a connection succeeds again
  // (src/outageLog.ts), not one a request; the callers get 503 meanwhile.
  if (tgsError.code === 'ServiceUnavailable' && !(err instanceof TgsError)) postgresOutages.get(request.server)?.failed(err, 'answering 503 until it is back');
  if (tgsError.code === 'InternalServerError') {
    const where = endpoint?.name ?? `${request.method} ${request.url}`;
    // With a process logger (src/log.ts) fastify's request.log is it; without one (tests) stderr.
    if (loggedServers.has(request.server)) request.log.error({ err, method: where }, 'internal error');
    else console.error(`internal error in ${where}:`, err);
  }
  if (tgsError.code === 'TooManyRequests') void reply.header('retry-after', String(RETRY_AFTER_SECONDS));
  // Taskcluster's answer to credentials it does not accept (never to a request without any: see checkScopes)
  if (tgsError.code === 'AuthenticationFailed') void reply.header('www-authenticate', 'hawk');
  if (!request.raw.complete && hasBody(request)) lingerRefusedBody(request, reply);
  return reply.status(tgsError.status).header('content-type', 'application/json').send(errorBody(tgsError, request, endpoint));
}

const hasBody = (request: FastifyRequest) =>
  request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;

/** What a request presents to be authenticated. */
const requestForAuth = (request: FastifyRequest): RequestForAuth => ({
  method: request.method,
  url: request.url,
  host: request.headers.host ?? '',
  authorization: request.headers.authorization,
  contentType: request.headers['content-type'] ?? '',
});

/** An endpoint with `ownClients` authenticates once its body is read: until then, nobody. */
const NOT_YET_AUTHENTICATED: Authenticated = {
  auth: { clientId: undefined, scopes: [] },
  verifyPayload: () => undefined,
  payloadHasher: () => undefined,
};

/**
 * Throws 403 InsufficientScopes when the caller's scopes do not satisfy `expr`: a request without credentials holds
 * the `anonymous` role, as in Taskcluster (401 is only for credentials that do not authenticate).
 */
const checkScopes = (auth: Authenticated['auth'], expr: ScopeExpression) => requireScopes(auth.clientId, auth.scopes, expr);

export interface ApiServerOptions {
  /** Validate handlers' output against their schemas (tests turn this on). */
  validateOutput?: boolean;
  /**
   * A pino logger (src/log.ts): request lines carry `reqId` (a fresh UUID per request);
   * src/api/httpMetrics.ts logs each request. Absent: no request logging (tests).
   */
  logger?: FastifyBaseLogger;
}

export function createApiServer(deps: ApiDeps, endpoints: Endpoint[], options: ApiServerOptions = {}): FastifyInstance {
  const app = Fastify({
    // request lines off through a LogController: the top-level disableRequestLogging printed a FastifyDeprecation
    // warning (FSTDEP023, fastify 5.12) at every start
    ...(options.logger
      ? { loggerInstance: options.logger, logController: new LogController({ disableRequestLogging: true }), genReqId: () => randomUUID() }
      : { logger: false }),
    // Every endpoint sets its own limit (src/api/bodyLimits.ts); this one covers the UI and unknown paths.
    bodyLimit: SERVER_BODY_LIMIT,
    // Taskcluster's slugids and artifact names may contain characters fastify would otherwise reject.
    routerOptions: { maxParamLength: 1024 },
    // A bad %-escape in the path (FST_ERR_BAD_URL) is the client's mistake, answered in Taskcluster's shape.
    frameworkErrors: (err, request, reply) => {
      void sendError(reply, request, err);
    },
  });
  if (options.logger) loggedServers.add(app);
  const outage = new OutageLog((line) => (options.logger ? options.logger.warn(line) : console.error(line)), 'API: Postgres');
  postgresOutages.set(app, outage);
  deps.pool.on('connect', () => outage.recovered('answering again'));
  const authenticate = createAuthenticator(deps.clients, { rootUrl: () => deps.config.rootUrl, expand: (scopes) => deps.roles.expand(scopes) });
  // the nonces seen by endpoints that authenticate against their own clients (a replay of one is refused too)
  const ownClientNonces = new NonceCache(TIMESTAMP_SKEW_SECONDS);
  const limits = concurrencyLimits(deps.config);

  // JSON bodies keep their raw text so a Hawk payload hash can be checked.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const text = (body as Buffer).toString('utf8');
    request.rawBody = text;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new TgsError('InputError', `Malformed JSON body: ${(err as Error).message.slice(0, 200)}`), undefined);
    }
  });
  // Any other content type is refused without reading it: only raw-body endpoints (registered below with
  // their own parser) take one.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', (_request, _payload, done) => done(new TgsError('InputError', 'Send the body as application/json'), undefined));

  app.setErrorHandler((err, request, reply) => sendError(reply, request, err));
  const noSuchEndpoint = (request: FastifyRequest) => new TgsError('ResourceNotFound', `No such endpoint: ${request.method} ${request.url.split('?')[0]}`);
  app.setNotFoundHandler((request, reply) => sendError(reply, request, noSuchEndpoint(request)));
  // An unknown route is answered 404 before its body is read, whatever its size (Taskcluster answers 404 to an
  // unknown route, body or not): the server-wide body limit would otherwise answer 413 first.
  app.addHook('onRequest', (request, reply, done) => {
    if (request.is404) void sendError(reply, request, noSuchEndpoint(request));
    else done();
  });

  const routes: Array<{ endpoint: Endpoint; route: Parameters<FastifyInstance['route']>[0] }> = [];
  for (const endpoint of endpoints) {
    if (endpoint.ownClients && (endpoint.scopes !== undefined || endpoint.rawBody || endpoint.streamJson)) {
      throw new Error(`${endpoint.name}: an endpoint with ownClients reads its body whole and checks its scopes itself`);
    }
    const declaredParams = templateParameters(endpoint.scopes ?? { AllOf: [] });
    const routeParams = new Set([...endpoint.route.matchAll(/<([a-zA-Z]+)>/g)].map((m) => m[1]));
    const autoAuthorize = endpoint.scopes !== undefined && [...declaredParams].every((p) => routeParams.has(p));
    // What can be checked before the body is read: the declared scopes in full, or the conjuncts that need
    // only route parameters (createTaskGraph's scheduler:create-task-graph); anonymous callers of an endpoint
    // whose scopes the `anonymous` role cannot satisfy for any parameters are refused as well.
    const earlyPartOf = (route: string) => {
      if (endpoint.scopes === undefined || autoAuthorize) return undefined;
      const wildcardName = wildcardParam(route);
      const pathParams = new Set([...route.matchAll(/<([a-zA-Z]+)>/g)].map((m) => m[1]));
      if (wildcardName) pathParams.add(wildcardName);
      return knownPart(endpoint.scopes, pathParams);
    };
    const outputValidator = endpoint.output && options.validateOutput ? compile(endpoint.output) : undefined;
    const limit = endpoint.concurrency ? limits[endpoint.concurrency] : undefined;

    const bodyLimit =
      typeof endpoint.bodyLimit === 'function'
        ? endpoint.bodyLimit(deps.config)
        : (endpoint.bodyLimit ?? (endpoint.input ? DEFAULT_BODY_LIMIT : NO_INPUT_BODY_LIMIT));

    /** Everything that needs no body: parameters, query, Hawk header or bewit, scopes, limits. */
    const admit = (route: string) => {
      const wildcard = wildcardParam(route);
      const earlyPart = earlyPartOf(route);
      return async (request: FastifyRequest, reply: FastifyReply) => {
        try {
          const params = { ...(request.params as Record<string, string>) };
          // served without its optional last parameter: Taskcluster's handler takes it as ''
          if (endpoint.optionalParam !== undefined) params[endpoint.optionalParam] ??= '';
          if (wildcard !== undefined && params['*'] !== undefined) {
            params[wildcard] = params['*'];
            delete params['*'];
          }
          for (const [name, value] of Object.entries(params)) {
            // Parameters without a strict pattern (artifact names, labels) reach SQL: NUL would be a 500 there.
            const why = unstorableString(value);
            if (why) throw new TgsError('InputError', `Invalid ${name}: it ${why}`);
          }
          for (const [name, pattern] of Object.entries(endpoint.params ?? {})) {
            if (params[name] !== undefined && !pattern.test(params[name])) {
              throw new TgsError('InputError', `Invalid ${name} ${JSON.stringify(params[name])}: ${pattern === SLUGID ? `not a ${name} (a slugid: 22 characters of A-Z, a-z, 0-9, _ and -, as slugid.nice() makes)` : `must match ${pattern}`}`);
            }
          }
          const query = (request.query ?? {}) as Record<string, string | undefined>;
          for (const [name, value] of Object.entries(query)) {
            if (name === 'bewit') continue;
            // own properties only: `?__proto__=` or `?constructor=` must not find Object.prototype's members
            const pattern = endpoint.query && Object.hasOwn(endpoint.query, name) ? endpoint.query[name] : undefined;
            if (!pattern) throw new TgsError('InputError', `Unknown query parameter ${name}`);
            if (typeof value !== 'string' || !pattern.test(value)) {
              throw new TgsError('InputError', `Invalid query parameter ${name}=${JSON.stringify(value)}: must match ${pattern}`);
            }
          }
          const authenticated = endpoint.ownClients ? NOT_YET_AUTHENTICATED : await authenticate(requestForAuth(request));
          const { auth } = authenticated;
          let authorized = false;
          if (autoAuthorize) {
            checkScopes(auth, renderExpression(endpoint.scopes as ScopeExpression, params));
            authorized = true;
          } else if (endpoint.scopes !== undefined && !endpoint.isPublic?.(params)) {
            if (earlyPart) checkScopes(auth, renderExpression(earlyPart, params));
            // An anonymous caller holds the `anonymous` role (never an empty set): when that role could grant
            // the endpoint for some parameters the handler's full check decides.
            const refused = auth.clientId === undefined ? unsatisfiablePart(auth.scopes, endpoint.scopes) : undefined;
            if (refused) checkScopes(auth, refused);
          }
          endpoint.beforeBody?.({ params, query, deps, request });
          if (limit) {
            const release = limit.acquire();
            reply.raw.once('close', release);
          }
          request.admitted = { params, query, authenticated, authorized };
        } catch (err) {
          return sendError(reply, request, err, endpoint);
        }
      };
    };

    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      let streamed: StreamedBody | undefined;
      try {
        const { params, query } = request.admitted as Admitted;
        let { authenticated } = request.admitted as Admitted;
        let authorized = endpoint.scopes === undefined || (request.admitted as Admitted).authorized;
        let body: unknown = request.body;
        if (endpoint.rawBody) {
          // A stream, left to the handler. Its bytes are authorized by the handler (a signed URL), not by a
          // Hawk payload hash.
        } else if (endpoint.streamJson) {
          const declared = Number(request.headers['content-length']);
          if (declared > bodyLimit) throw bodyTooLarge(bodyLimit);
          streamed = new StreamedBody(request.body as Readable | undefined, bodyLimit, authenticated.payloadHasher());
          const type = (request.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
          if (request.body !== undefined && type !== 'application/json') throw new TgsError('InputError', 'Send the body as application/json');
          body = objectMembers(streamed.chunks(), { expand: endpoint.streamJson.expand, maxValueBytes: endpoint.streamJson.maxMemberBytes });
        } else {
          // kept only where the credentials are checked after the body (ownClients)
          const rawBody = endpoint.ownClients ? request.rawBody : undefined;
          if (!endpoint.ownClients) authenticated.verifyPayload(request.rawBody);
          // Checked: a 100,000-task graph's body text (35 MB) need not live as long as the request does.
          request.rawBody = undefined;
          if (endpoint.input) {
            // A missing body validates as {} so optional-only inputs (rerun options) need none.
            body = validateInput(endpoint.input, body ?? {});
          } else if (body !== undefined) {
            throw new TgsError('InputError', 'This endpoint takes no body');
          }
          if (endpoint.ownClients) {
            const own = endpoint.ownClients(body);
            const authenticateOwn = createAuthenticator(own.store, { rootUrl: () => deps.config.rootUrl, expand: own.expand, nonces: ownClientNonces });
            authenticated = await authenticateOwn(requestForAuth(request));
            authenticated.verifyPayload(rawBody);
          }
        }
        const { auth } = authenticated;
        const ctx: EndpointContext = {
          params,
          query,
          body,
          auth,
          deps,
          request,
          reply,
          upgrade: upgradeOf(request.raw),
          satisfies: (expr) => expressionSatisfied(auth.scopes, expr),
          authorizeExpression: (expr) => {
            checkScopes(auth, expr);
            authorized = true;
          },
          authorize: (extra = {}) => {
            if (endpoint.scopes === undefined) throw new Error(`${endpoint.name} declares no scopes`);
            checkScopes(auth, renderExpression(endpoint.scopes, { ...params, ...extra }));
            authorized = true;
          },
        };
        const result = await endpoint.handler(ctx);
        if (!authorized) throw new Error(`${endpoint.name} returned without checking its scopes`);
        if (result === UPGRADED) return reply;
        if (result instanceof RawReply) {
          let answer = result.body;
          // An answer already in its JSON text is held to the endpoint's schema all the same (one written as a
          // stream is read whole first: only where output is validated, the tests).
          if (outputValidator && result.status === 200 && result.headers['content-type'] === 'application/json') {
            if (answer !== undefined && typeof answer !== 'string' && !Buffer.isBuffer(answer)) answer = await streamText(answer);
            if (typeof answer === 'string' && !outputValidator(JSON.parse(answer))) {
              throw new Error(`${endpoint.name} output does not match its schema: ${describeErrors(outputValidator.errors, 'output')}`);
            }
          }
          void reply.status(result.status).headers(result.headers);
          return reply.send(answer ?? '');
        }
        if (outputValidator && !outputValidator(result)) {
          throw new Error(`${endpoint.name} output does not match its schema: ${describeErrors(outputValidator.errors, 'output')}`);
        }
        return reply.status(200).header('content-type', 'application/json').send(result ?? {});
      } catch (err) {
        // A streamed body refused part-way: read what the client is still sending, so it gets the answer (or
        // 401, when that body does not match its payload hash after all).
        if (streamed && !(err instanceof TgsError && err.details?.bodyLimit !== undefined)) {
          try {
            await streamed.settle();
          } catch (mismatch) {
            return sendError(reply, request, mismatch, endpoint);
          }
        }
        return sendError(reply, request, err, endpoint);
      }
    };

    for (const route of [endpoint.route, ...(endpoint.aliases ?? [])]) {
      const onRequest = admit(route);
      for (const url of servedPaths(endpoint, route)) {
        routes.push({ endpoint, route: { method: endpoint.method.toUpperCase() as 'GET', url, bodyLimit, onRequest, handler: handle } });
      }
    }
  }
  for (const { endpoint, route } of routes) if (!endpoint.rawBody && !endpoint.streamJson) app.route(route);
  // Raw-body and streamed-JSON endpoints (artifact uploads, graph submits) get the request stream itself, whatever
  // the content type: their own context has a single parser that reads nothing.
  void app.register(async (raw) => {
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    for (const { endpoint, route } of routes) if (endpoint.rawBody || endpoint.streamJson) raw.route(route);
  });

  routeUpgrades(app);

  const services = [...new Set(endpoints.map((e) => e.service))];
  for (const service of services) {
    const document = async () => openApiDocument(service, deps.config.rootUrl, endpoints.filter((e) => e.service === service));
    for (const url of [`/api/${service}/v1/openapi.json`, `/api/${service}/v1/openapi.json/`]) app.get(url, document);
  }
  return app;
}
