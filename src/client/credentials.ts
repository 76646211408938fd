import type { TgsCredentials } from './http.js';

/** Where the CLI's HTTP commands send requests, and with which credentials. */
export interface ResolvedCredentials {
  rootUrl: string;
  /** undefined when no credentials are set: only reads will work. */
  credentials?: TgsCredentials;
  /** Which variables the values came from, for error messages (e.g. `TGS_CLIENT_ID`). */
  source: { rootUrl: string; credentials?: string };
}

/** What `tgs dev` and `tgs api` listen on by default. */
export const DEFAULT_ROOT_URL = 'http://127.0.0.1:8080';

const HOW_TO =
  'Set TGS_ROOT_URL, TGS_CLIENT_ID and TGS_ACCESS_TOKEN (`tgs dev` prints them for its root client), ' +
  'or TASKCLUSTER_ROOT_URL, TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN.';

/**
 * The tgs variables win; Taskcluster's are the fallback, so a shell already set up for `taskcluster` works.
 * A clientId without its accessToken (or the reverse) is an error rather than a silent anonymous request.
 */
export function resolveCredentials(env: NodeJS.ProcessEnv = process.env): ResolvedCredentials {
  const rootUrlVar = env.TGS_ROOT_URL ? 'TGS_ROOT_URL' : env.TASKCLUSTER_ROOT_URL ? 'TASKCLUSTER_ROOT_URL' : undefined;
  const rootUrl = (rootUrlVar ? (env[rootUrlVar] as string) : DEFAULT_ROOT_URL).replace(/\/+$/, '');
  if (!/^https?:\/\/[^/]/.test(rootUrl)) {
    throw new Error(`${rootUrlVar} must be an http(s) URL like ${DEFAULT_ROOT_URL}, got ${JSON.stringify(rootUrl)}`);
  }
  const source: ResolvedCredentials['source'] = { rootUrl: rootUrlVar ?? `the default ${DEFAULT_ROOT_URL}` };
  for (const prefix of ['TGS', 'TASKCLUSTER'] as const) {
    const clientId = env[`${prefix}_CLIENT_ID`];
    const accessToken = env[`${prefix}_ACCESS_TOKEN`];
    if (!clientId && !accessToken) continue;
    if (!clientId || !accessToken) {
      const missing = clientId ? `${prefix}_ACCESS_TOKEN` : `${prefix}_CLIENT_ID`;
      throw new Error(`${missing} is not set but ${clientId ? `${prefix}_CLIENT_ID` : `${prefix}_ACCESS_TOKEN`} is: set both. ${HOW_TO}`);
    }
    const certificate = env[`${prefix}_CERTIFICATE`] || undefined;
    return {
      rootUrl,
      credentials: { clientId, accessToken, ...(certificate ? { certificate } : {}) },
      source: { ...source, credentials: `${prefix}_CLIENT_ID/${prefix}_ACCESS_TOKEN` },
    };
  }
  return { rootUrl, source };
}

/** Like resolveCredentials, for commands that cannot work without credentials. */
export function requireCredentials(env: NodeJS.ProcessEnv = process.env): Required<Pick<ResolvedCredentials, 'credentials'>> & ResolvedCredentials {
  const resolved = resolveCredentials(env);
  if (!resolved.credentials) throw new Error(`this command needs credentials, and none are set. ${HOW_TO}`);
  return resolved as Required<Pick<ResolvedCredentials, 'credentials'>> & ResolvedCredentials;
}

/**
 * Turns an API failure into a message that says what to do next: start the server, fix the credentials,
 * or ask for the missing scopes. Other errors keep their message.
 */
export function describeApiError(err: unknown, resolved: ResolvedCredentials): string {
  const e = err as { name?: string; status?: number; code?: string; message?: string };
  if (e?.name !== 'TgsApiError') return e?.message ?? String(err);
  const creds = resolved.source.credentials ?? 'TGS_CLIENT_ID/TGS_ACCESS_TOKEN';
  switch (e.status) {
    case 0:
      return `cannot reach ${resolved.rootUrl} (from ${resolved.source.rootUrl}): is \`tgs api\` or \`tgs dev\` running at ${resolved.rootUrl}? ` +
        'Start one, or set TGS_ROOT_URL to where it runs.';
    case 401:
      return resolved.credentials
        ? `authentication failed as ${resolved.credentials.clientId}: ${e.message}\nCheck ${creds} (the client may have been deleted, its token reset, or it expired).`
        : `this request needs credentials: ${e.message}\n${HOW_TO}`;
    case 403:
      // without credentials the request holds the anonymous role, refused with 403 as in Taskcluster
      return resolved.credentials ? `${e.message}\nUse a client that has these scopes (check ${creds}).` : `this request needs credentials: ${e.message}\n${HOW_TO}`;
    default:
      return `${e.code ?? 'Error'} (${e.status}): ${e.message}`;
  }
}
