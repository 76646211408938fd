import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { TgsError } from '../errors.js';
import { createAuthenticator, type AuthContext } from '../auth/authenticate.js';
import {
  expressionSatisfied,
  formatExpression,
  renderExpression,
  templateParameters,
  unsatisfiedPart,
  type ScopeExpression,
} from '../auth/scopes.js';
import type { ApiDeps } from './deps.js';
import { RawReply, type Endpoint, type EndpointContext } from './endpoint.js';
import { compile, describeErrors, validateInput } from './validate.js';
import { openApiDocument } from './openapi.js';

const DEFAULT_BODY_LIMIT = 10 * 1024 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    rawBody?: string;
  }
}

/** `/task/<taskId>` → `/task/:taskId`; a trailing `<name*>` matches the rest of the path, slashes included. */
export function fastifyPath(route: string): string {
  return route.replace(/<([a-zA-Z]+)>/g, ':$1').replace(/<[a-zA-Z]+\*>$/, '*');
}

const wildcardParam = (route: string) => /<([a-zA-Z]+)\*>$/.exec(route)?.[1];

function errorBody(err: TgsError, request: FastifyRequest, endpoint?: Endpoint) {
  return {
    code: err.code,
    message: err.message,
    requestInfo: {
      method: endpoint?.name ?? request.method,
      params: request.params ?? {},
      payload: request.body ?? {},
      time: new Date().toISOString(),
    },
    ...(err.details ? { details: err.details } : {}),
  };
}

function toTgsError(err: unknown): TgsError {
  if (err instanceof TgsError) return err;
  const e = err as { code?: string; statusCode?: number; message?: string };
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new TgsError('InputTooLarge', 'The request body is too large');
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new TgsError('InputError', 'Unsupported Content-Type: send application/json');
  }
  if (e.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new TgsError('InputError', 'The JSON body is empty');
  if (e.statusCode === 404) return new TgsError('ResourceNotFound', e.message ?? 'Not found');
  return new TgsError('InternalServerError', 'Internal server error');
}

export interface ApiServerOptions {
  /** Validate handlers' output against their schemas (tests turn this on). */
  validateOutput?: boolean;
  logger?: boolean;
}

export function createApiServer(deps: ApiDeps, endpoints: Endpoint[], options: ApiServerOptions = {}): FastifyInstance {
  const app = Fastify({
    logger: options.logger ?? false,
    bodyLimit: 64 * 1024 * 1024,
    // Taskcluster's slugids and artifact names may contain characters fastify would otherwise reject.
    routerOptions: { maxParamLength: 1024 },
  });
  const authenticate = createAuthenticator(deps.clients);

  // JSON bodies keep their raw text so a Hawk payload hash can be checked; raw-body routes (artifact
  // uploads) get the bytes whatever the content type.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    if ((request.routeOptions.config as { rawBody?: boolean } | undefined)?.rawBody) return done(null, body);
    const text = (body as Buffer).toString('utf8');
    request.rawBody = text;
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new TgsError('InputError', `Malformed JSON body: ${(err as Error).message}`), undefined);
    }
  });
  // Anything else (artifact uploads) arrives as a Buffer, text included (fastify's own text/plain parser would
  // decode it); endpoints that do not want it reject it.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_request, body, done) => done(null, body));

  app.setErrorHandler((err, request, reply) => {
    const tgsError = toTgsError(err);
    if (tgsError.code === 'InternalServerError') request.log.error(err);
    if (tgsError.code === 'InternalServerError' && !(err instanceof TgsError)) {
      console.error(`internal error on ${request.method} ${request.url}:`, err);
    }
    void reply.status(tgsError.status).header('content-type', 'application/json').send(errorBody(tgsError, request));
  });
  app.setNotFoundHandler((request, reply) => {
    const err = new TgsError('ResourceNotFound', `No such endpoint: ${request.method} ${request.url.split('?')[0]}`);
    void reply.status(404).send(errorBody(err, request));
  });

  for (const endpoint of endpoints) {
    const base = `/api/${endpoint.service}/v1`;
    const declaredParams = templateParameters(endpoint.scopes ?? { AllOf: [] });
    const routeParams = new Set([...endpoint.route.matchAll(/<([a-zA-Z]+)>/g)].map((m) => m[1]));
    const autoAuthorize = endpoint.scopes !== undefined && [...declaredParams].every((p) => routeParams.has(p));
    const wildcard = wildcardParam(endpoint.route);
    const outputValidator = endpoint.output && options.validateOutput ? compile(endpoint.output) : undefined;

    const handle = async (request: FastifyRequest, reply: FastifyReply) => {
      try {
        const params = { ...(request.params as Record<string, string>) };
        if (wildcard !== undefined && params['*'] !== undefined) {
          params[wildcard] = params['*'];
          delete params['*'];
        }
        for (const [name, pattern] of Object.entries(endpoint.params ?? {})) {
          if (params[name] !== undefined && !pattern.test(params[name])) {
            throw new TgsError('InputError', `Invalid ${name} ${JSON.stringify(params[name])}: must match ${pattern}`);
          }
        }
        const query = (request.query ?? {}) as Record<string, string | undefined>;
        for (const [name, value] of Object.entries(query)) {
          if (name === 'bewit') continue;
          const pattern = endpoint.query?.[name];
          if (!pattern) throw new TgsError('InputError', `Unknown query parameter ${name}`);
          if (typeof value !== 'string' || !pattern.test(value)) {
            throw new TgsError('InputError', `Invalid query parameter ${name}=${JSON.stringify(value)}: must match ${pattern}`);
          }
        }
        let body: unknown = request.body;
        if (endpoint.rawBody) {
          // left to the handler
        } else if (endpoint.input) {
          if (Buffer.isBuffer(body)) throw new TgsError('InputError', 'Send the body as application/json');
          // A missing body validates as {} so optional-only inputs (rerun options) need none.
          body = validateInput(endpoint.input, body ?? {});
        } else if (body !== undefined && !(Buffer.isBuffer(body) && body.length === 0)) {
          throw new TgsError('InputError', 'This endpoint takes no body');
        }

        const auth: AuthContext = await authenticate({
          method: request.method,
          url: request.url,
          host: request.headers.host ?? '',
          authorization: request.headers.authorization,
          contentType: request.headers['content-type'] ?? '',
          rawBody: request.rawBody,
        });
        // Checked: a 100,000-task graph's body text (35 MB) need not live as long as the request does.
        request.rawBody = undefined;
        let authorized = endpoint.scopes === undefined;
        const check = (expr: ScopeExpression) => {
          if (!expressionSatisfied(auth.scopes, expr)) {
            const missing = unsatisfiedPart(auth.scopes, expr) ?? expr;
            throw new TgsError(
              auth.clientId === undefined ? 'AuthenticationFailed' : 'InsufficientScopes',
              auth.clientId === undefined
                ? `This request needs credentials with scopes: ${formatExpression(missing)}`
                : `Client ${auth.clientId} lacks scopes: ${formatExpression(missing)}`,
              { required: missing },
            );
          }
        };
        const ctx: EndpointContext = {
          params,
          query,
          body,
          auth,
          deps,
          request,
          reply,
          satisfies: (expr) => expressionSatisfied(auth.scopes, expr),
          authorizeExpression: (expr) => {
            check(expr);
            authorized = true;
          },
          authorize: (extra = {}) => {
            if (endpoint.scopes === undefined) throw new Error(`${endpoint.name} declares no scopes`);
            check(renderExpression(endpoint.scopes, { ...params, ...extra }));
            authorized = true;
          },
        };
        if (autoAuthorize) ctx.authorize();
        const result = await endpoint.handler(ctx);
        if (!authorized) throw new Error(`${endpoint.name} returned without checking its scopes`);
        if (result instanceof RawReply) {
          void reply.status(result.status).headers(result.headers);
          return reply.send(result.body ?? '');
        }
        if (outputValidator && !outputValidator(result)) {
          throw new Error(`${endpoint.name} output does not match its schema: ${describeErrors(outputValidator.errors, 'output')}`);
        }
        return reply.status(200).header('content-type', 'application/json').send(result ?? {});
      } catch (err) {
        const tgsError = toTgsError(err);
        if (tgsError.code === 'InternalServerError') console.error(`internal error in ${endpoint.name}:`, err);
        return reply.status(tgsError.status).header('content-type', 'application/json').send(errorBody(tgsError, request, endpoint));
      }
    };

    for (const route of [endpoint.route, ...(endpoint.aliases ?? [])]) {
      app.route({
        method: endpoint.method.toUpperCase() as 'GET',
        url: base + fastifyPath(route),
        bodyLimit: endpoint.rawBody ? deps.config.maxArtifactBytes : (endpoint.bodyLimit ?? DEFAULT_BODY_LIMIT),
        config: { rawBody: endpoint.rawBody === true },
        handler: handle,
      });
    }
  }

  const services = [...new Set(endpoints.map((e) => e.service))];
  for (const service of services) {
    app.get(`/api/${service}/v1/openapi.json`, async () =>
      openApiDocument(service, deps.config.rootUrl, endpoints.filter((e) => e.service === service)),
    );
  }
  return app;
}
