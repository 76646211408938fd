import http from 'node:http';
import https from 'node:https';
import hawk from 'hawk';

export interface TgsCredentials {
  clientId: string;
  accessToken: string;
  certificate?: string;
}

/** An error answer from a tgs (or Taskcluster) API: `{code, message}` plus the HTTP status. */
export class TgsApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
    this.name = 'TgsApiError';
  }
}

// Keep-alive connections, reused across requests: node:http costs the fast worker about half of what
// fetch (undici) did per request in the queue benchmark, and every tgs worker talks to the API all day.
const agents = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };

interface RawResponse {
  status: number;
  text: string;
}

function send(url: URL, method: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal | undefined, retried = false): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const lib = url.protocol === 'https:' ? https : http;
    const req = lib.request(url, { method, headers, agent: agents[url.protocol as 'http:' | 'https:'], signal }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // A kept-alive connection the server closed just as we reused it: the request never reached the
      // server, so sending it again on a fresh connection is safe (Node's documented pattern).
      if (!retried && req.reusedSocket && err.code === 'ECONNRESET') {
        send(url, method, headers, body, signal, true).then(resolve, reject);
        return;
      }
      reject(err);
    });
    req.end(body);
  });
}

/** The Hawk `Authorization` header of a request (no payload hash), with temporary credentials' certificate in `ext`. */
export function hawkHeader(url: string, method: string, credentials: TgsCredentials): string {
  const ext = credentials.certificate ? Buffer.from(JSON.stringify({ certificate: JSON.parse(credentials.certificate) })).toString('base64') : undefined;
  return hawk.client.header(url, method, {
    credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' },
    ...(ext ? { ext } : {}),
  }).header;
}

/** Signed JSON requests against `<rootUrl>/api/<service>/v1`. */
export class ApiClient {
  constructor(
    readonly rootUrl: string,
    readonly credentials?: TgsCredentials,
    /** Aborts requests in flight (a long-polling claimWork) when a worker stops. */
    readonly signal?: AbortSignal,
  ) {}

  async request<T = any>(service: string, method: string, path: string, body?: unknown, credentials = this.credentials): Promise<T> {
    const url = `${this.rootUrl.replace(/\/+$/, '')}/api/${service}/v1${path}`;
    const headers: Record<string, string> = { accept: 'application/json' };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) headers['content-type'] = 'application/json';
    if (credentials) headers.authorization = hawkHeader(url, method, credentials);
    if (payload !== undefined) headers['content-length'] = String(Buffer.byteLength(payload));
    let res: RawResponse;
    try {
      res = await send(new URL(url), method, headers, payload, this.signal);
    } catch (err) {
      throw new TgsApiError(0, 'ConnectionFailed', `cannot reach ${this.rootUrl} (${(err as Error).message}): is \`tgs api\` running there?`);
    }
    const { text } = res;
    let parsed: any = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    if (res.status < 200 || res.status > 299) {
      throw new TgsApiError(res.status, parsed?.code ?? 'HttpError', parsed?.message ?? `${res.status} ${text.slice(0, 200)}`, parsed);
    }
    return parsed as T;
  }
}
