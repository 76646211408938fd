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
    if (credentials) {
      const ext = credentials.certificate
        ? Buffer.from(JSON.stringify({ certificate: JSON.parse(credentials.certificate) })).toString('base64')
        : undefined;
      headers.authorization = hawk.client.header(url, method, {
        credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' },
        ...(ext ? { ext } : {}),
      }).header;
    }
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body: payload, signal: this.signal });
    } catch (err) {
      throw new TgsApiError(0, 'ConnectionFailed', `cannot reach ${this.rootUrl} (${(err as Error).cause ?? (err as Error).message}): is \`tgs api\` running there?`);
    }
    const text = await res.text();
    let parsed: any = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    if (!res.ok) {
      throw new TgsApiError(res.status, parsed?.code ?? 'HttpError', parsed?.message ?? `${res.status} ${text.slice(0, 200)}`, parsed);
    }
    return parsed as T;
  }
}
