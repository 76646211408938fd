// Requests to the tgs APIs of the server that serves this page: reads unsigned (Taskcluster's GET endpoints
// need no credentials), actions signed with Hawk from the session's credentials.
import { hawkHeader } from './hawk';
import { getCredentials } from './session';

/** `<rootUrl>/`: the page lives at `<rootUrl>/ui/` (the server sets <base href>). */
export const rootUrl = new URL('../', document.baseURI).href;

export type Service = 'queue' | 'scheduler' | 'auth' | 'hooks' | 'index';

export function apiUrl(service: Service, path: string): string {
  return `${rootUrl}api/${service}/v1${path}`;
}

/** An artifact name in a URL: slashes kept, everything else escaped. */
export const artifactPath = (name: string) => name.split('/').map(encodeURIComponent).join('/');

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** For 403: the scope expression that was missing. */
    readonly required?: unknown,
    /** The error's `details` (e.g. a refused graph's `labels`). */
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class NotSignedInError extends Error {
  constructor() {
    super('Sign in first: actions are signed with your Taskcluster credentials (clientId and accessToken).');
  }
}

async function parse<T>(res: Response): Promise<T> {
  const text = await res.text();
  let body: any;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    throw new ApiError(res.status, body?.code ?? `HTTP ${res.status}`, body?.message ?? (text.slice(0, 300) || res.statusText), body?.details?.required, body?.details);
  }
  return body as T;
}

export async function apiGet<T = any>(service: Service, path: string, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(apiUrl(service, path), { headers: { accept: 'application/json' }, signal });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'ConnectionFailed', `cannot reach the tgs API at ${rootUrl} (${(err as Error).message})`);
  }
  return parse<T>(res);
}

/** A signed request with the session's credentials (or the ones given, e.g. to check them at sign-in). */
export async function apiSigned<T = any>(service: Service, method: string, path: string, body?: unknown, credentials = getCredentials()): Promise<T> {
  if (!credentials) throw new NotSignedInError();
  const url = apiUrl(service, path);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const headers: Record<string, string> = { accept: 'application/json' };
  if (payload !== undefined) headers['content-type'] = 'application/json';
  headers.authorization = await hawkHeader(url, method, credentials, payload !== undefined ? { payload, contentType: 'application/json' } : {});
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body: payload });
  } catch (err) {
    throw new ApiError(0, 'ConnectionFailed', `cannot reach the tgs API at ${rootUrl} (${(err as Error).message})`);
  }
  return parse<T>(res);
}

/** A scope expression as text: `a`, `a and b`, `(a or b)`. */
export function formatScopes(expr: unknown): string {
  if (typeof expr === 'string') return expr;
  if (expr && typeof expr === 'object') {
    const e = expr as { AllOf?: unknown[]; AnyOf?: unknown[] };
    if (e.AllOf) return e.AllOf.map(formatScopes).join(' and ');
    if (e.AnyOf) return `(${e.AnyOf.map(formatScopes).join(' or ')})`;
  }
  return JSON.stringify(expr);
}

/** What to show the user for a failed request. */
export function describeError(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 403) {
      const missing = err.required !== undefined ? ` Missing scope: ${formatScopes(err.required)}.` : '';
      return `Refused (403 ${err.code}): ${err.message}.${missing} Sign in with a client that has it.`;
    }
    if (err.status === 401) {
      return `Your credentials were not accepted (401 ${err.code}): ${err.message}. Check the clientId and accessToken, then sign in again.`;
    }
    return `${err.status ? `${err.status} ` : ''}${err.code}: ${err.message}`;
  }
  return (err as Error)?.message ?? String(err);
}
