import type { ApiDeps } from '../../api/deps.js';
import { declare, type JsonSchema, type OwnClients } from '../../api/endpoint.js';
import { createAuthenticator } from '../../auth/authenticate.js';
import { TgsError } from '../../errors.js';

/*
 * authenticateHawk (another service asks whether a request it received is signed by Taskcluster credentials, and
 * what they grant) and Taskcluster's test endpoints (testAuthenticate, testAuthenticateGet: fixed test clients for
 * client authors). Taskcluster: services/auth/src/api.js, services/auth/src/signaturevalidator.js.
 */

const scopeList: JsonSchema = { type: 'array', uniqueItems: true, items: { type: 'string', pattern: '^[\\x20-\\x7e]*$' } };
const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const CLIENT_ID_PATTERN = '^[A-Za-z0-9!@/:.+|_-]+$';

const HTTP_METHODS = [
  'get', 'post', 'put', 'head', 'delete', 'options', 'trace', 'copy', 'lock', 'mkcol', 'move', 'purge', 'propfind', 'proppatch',
  'unlock', 'report', 'mkactivity', 'checkout', 'merge', 'm-search', 'notify', 'subscribe', 'unsubscribe', 'patch', 'search', 'connect',
];

/** Taskcluster's authenticate-hawk-request. */
const authenticateHawkRequest: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['method', 'resource', 'host', 'port'],
  properties: {
    method: { type: 'string', enum: HTTP_METHODS },
    resource: { type: 'string', maxLength: 16384 },
    host: { type: 'string', format: 'hostname' },
    port: { type: 'integer', minimum: 0, maximum: 65535 },
    authorization: { type: 'string', maxLength: 16384 },
    sourceIp: { type: 'string', oneOf: [{ format: 'ipv6' }, { format: 'ipv4' }] },
  },
};

/** Taskcluster's authenticate-hawk-response: success, failure, or no credentials at all. */
const authenticateHawkResponse: JsonSchema = {
  oneOf: [
    {
      type: 'object',
      additionalProperties: false,
      required: ['status', 'scopes', 'scheme', 'clientId', 'expires'],
      properties: {
        status: { type: 'string', enum: ['auth-success'] },
        scopes: scopeList,
        scheme: { type: 'string', enum: ['hawk'] },
        hash: {},
        clientId: { type: 'string', pattern: CLIENT_ID_PATTERN },
        expires: dateTime,
      },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['status', 'message'],
      properties: { status: { type: 'string', enum: ['auth-failed'] }, message: { type: 'string' } },
    },
    {
      type: 'object',
      additionalProperties: false,
      required: ['status', 'scheme', 'scopes', 'expires'],
      properties: { status: { type: 'string', enum: ['no-auth'] }, scheme: { type: 'string', enum: ['none'] }, scopes: scopeList, expires: dateTime },
    },
  ],
};

/** Credentials that do not expire (the root client) are valid for 1000 years, as Taskcluster's static clients. */
const NEVER_MS = 1000 * 365.25 * 24 * 3600_000;
/** What a request without credentials is answered valid for (Taskcluster: 15 minutes). */
const NO_AUTH_MS = 15 * 60_000;

/**
 * The authenticator authenticateHawk checks requests with, one per API process: the one every request of tgs goes
 * through (the deployment's clients, the roles), with nonces and verified certificates of its own, since the
 * requests it is shown were sent to other services.
 */
const authenticators = new WeakMap<ApiDeps, ReturnType<typeof createAuthenticator>>();
function authenticatorOf(deps: ApiDeps) {
  let authenticate = authenticators.get(deps);
  if (!authenticate) {
    authenticate = createAuthenticator(deps.clients, { rootUrl: () => deps.config.rootUrl, expand: (scopes) => deps.roles.expand(scopes) });
    authenticators.set(deps, authenticate);
  }
  return authenticate;
}

interface HawkRequest {
  method: string;
  resource: string;
  host: string;
  port: number;
  authorization?: string;
  sourceIp?: string;
}

export const authenticateHawk = declare<HawkRequest>({
  service: 'auth',
  name: 'authenticateHawk',
  title: 'Authenticate Hawk Request',
  description:
    'Checks the Hawk signature (Authorization header or bewit in `resource`) of a request another service received ' +
    'at `host`:`port`, by the rules tgs authenticates its own requests with (temporary credentials, authorizedScopes, ' +
    'disabled and expired clients, replayed nonces), and answers `auth-success` with the clientId, its scopes expanded ' +
    'through the roles, until when they hold, and the payload hash the header carries (the caller checks its body ' +
    'against it); `auth-failed` with the reason; or `no-auth` with what a request without credentials holds. Needs no scopes.',
  method: 'post',
  route: '/authenticate-hawk',
  input: authenticateHawkRequest,
  output: authenticateHawkResponse,
  async handler({ body, deps }) {
    try {
      const { auth, payloadHash } = await authenticatorOf(deps)({
        method: body.method.toUpperCase(),
        url: body.resource,
        host: body.host,
        authorization: body.authorization,
        contentType: '',
        signedFor: { host: body.host, port: body.port },
      });
      if (auth.clientId === undefined) {
        return { status: 'no-auth', scheme: 'none', scopes: auth.scopes, expires: new Date(Date.now() + NO_AUTH_MS).toISOString() };
      }
      return {
        status: 'auth-success',
        scheme: 'hawk',
        scopes: auth.scopes,
        clientId: auth.clientId,
        expires: new Date(auth.validUntil ?? Date.now() + NEVER_MS).toISOString(),
        ...(payloadHash === undefined ? {} : { hash: payloadHash }),
      };
    } catch (err) {
      // the request did not authenticate (or its bewit is not even readable): an answer, not an error of this call
      if (err instanceof TgsError) return { status: 'auth-failed', message: err.message };
      throw err;
    }
  },
});

/** Taskcluster's test client. */
const TEST_CLIENT = { clientId: 'tester', accessToken: 'no-secret' };

const ANONYMOUS = 'assume:anonymous';

/**
 * The scopes with `assume:anonymous`, as Taskcluster's test endpoints give every request it (taskcluster-lib-scopes
 * mergeScopeSets with `['assume:anonymous']`): placed before the first scope that sorts after it, unless a scope
 * already is it or covers it. No roles: the test clients are not the deployment's.
 */
function withAnonymous(scopes: string[]): string[] {
  if (scopes.some((s) => s === ANONYMOUS || (s.endsWith('*') && ANONYMOUS.startsWith(s.slice(0, -1))))) return scopes;
  const at = scopes.findIndex((s) => s > ANONYMOUS);
  return at < 0 ? [...scopes, ANONYMOUS] : [...scopes.slice(0, at), ANONYMOUS, ...scopes.slice(at)];
}

/** The one test client `tester` (access token `no-secret`), holding `scopes`. */
function testClient(scopes: string[]): OwnClients {
  return {
    store: { get: async (clientId) => (clientId === TEST_CLIENT.clientId ? { ...TEST_CLIENT, scopes } : undefined) },
    expand: async (s) => withAnonymous(s),
  };
}

/** Taskcluster's test-authenticate-request. */
const testAuthenticateRequest: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['clientScopes', 'requiredScopes'],
  properties: {
    clientScopes: { ...scopeList, default: [], maxItems: 1000, items: { type: 'string', pattern: '^[\\x20-\\x7e]*$', maxLength: 1024 } },
    requiredScopes: { ...scopeList, default: [], maxItems: 1000, items: { type: 'string', pattern: '^[\\x20-\\x7e]*$', maxLength: 1024 } },
  },
};

/** Taskcluster's test-authenticate-response. */
const testAuthenticateResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['clientId', 'scopes'],
  properties: { clientId: { type: 'string', pattern: CLIENT_ID_PATTERN }, scopes: scopeList },
};

/** Taskcluster's clientId for a request that carried no credentials. */
const NO_AUTH_CLIENT_ID = 'auth-failed:no-auth';

export const testAuthenticate = declare<{ clientScopes: string[]; requiredScopes: string[] }>({
  service: 'auth',
  name: 'testAuthenticate',
  title: 'Test Authentication',
  description:
    'For testing client implementations: authenticates the request against the one test client, clientId `tester` with ' +
    'accessToken `no-secret` (never against the deployment\'s clients), holding the body\'s `clientScopes` (no roles; ' +
    '`assume:anonymous` is added), with certificates and authorizedScopes applied as for any request; then requires ' +
    '`requiredScopes` (403 when they are not held) and answers the clientId and scopes the request has.',
  method: 'post',
  route: '/test-authenticate',
  input: testAuthenticateRequest,
  output: testAuthenticateResponse,
  ownClients: (body) => testClient(body.clientScopes),
  async handler({ body, auth, authorizeExpression }) {
    authorizeExpression({ AllOf: body.requiredScopes });
    return { clientId: auth.clientId ?? NO_AUTH_CLIENT_ID, scopes: auth.scopes };
  },
});

export const testAuthenticateGet = declare({
  service: 'auth',
  name: 'testAuthenticateGet',
  title: 'Test Authentication (GET)',
  description:
    'testAuthenticate with GET, so signed URLs (bewits) can be tested: the test client `tester` (accessToken ' +
    '`no-secret`) holds `test:*` and `auth:create-client:test:*`, and the request must hold `test:authenticate-get`.',
  method: 'get',
  route: '/test-authenticate-get/',
  output: testAuthenticateResponse,
  ownClients: () => testClient(['test:*', 'auth:create-client:test:*']),
  async handler({ auth, authorizeExpression }) {
    authorizeExpression('test:authenticate-get');
    return { clientId: auth.clientId ?? NO_AUTH_CLIENT_ID, scopes: auth.scopes };
  },
});
