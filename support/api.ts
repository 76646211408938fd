import { randomBytes } from 'node:crypto';
import hawk from 'hawk';
import { loadConfig, ROOT_CLIENT_ID, type Config } from '../src/config.js';
import { buildApi, type ApiApp } from '../src/processes/api.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export interface Credentials {
  clientId: string;
  accessToken: string;
  certificate?: string;
}

export interface TestApi {
  rootUrl: string;
  api: ApiApp;
  db: TestDatabase;
  config: Config;
  root: Credentials;
  /** A request signed with Hawk (root credentials unless others are given; `null` for none). */
  request(method: string, path: string, body?: unknown, credentials?: Credentials | null): Promise<{ status: number; body: any; headers: Headers }>;
  close(): Promise<void>;
}

export function hawkHeader(url: string, method: string, credentials: Credentials, options: { authorizedScopes?: string[] } = {}): string {
  const ext: Record<string, unknown> = {};
  if (credentials.certificate) ext.certificate = JSON.parse(credentials.certificate);
  if (options.authorizedScopes) ext.authorizedScopes = options.authorizedScopes;
  return hawk.client.header(url, method, {
    credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' },
    ...(Object.keys(ext).length ? { ext: Buffer.from(JSON.stringify(ext)).toString('base64') } : {}),
  }).header;
}

/** Starts the API on a free port against a fresh database (on `postgresUrl`, by default the tests' server). */
export async function startTestApi(overrides: Partial<Config> = {}, options: { log?: (line: string) => void; postgresUrl?: string } = {}): Promise<TestApi> {
  const db = await createTestDatabase({ postgresUrl: options.postgresUrl });
  const rootAccessToken = randomBytes(20).toString('hex');
  const config = loadConfig({}, { databaseUrl: db.url, rootAccessToken, port: 0, sweepIntervalMs: 200, ...overrides });
  const api = await buildApi(config, { validateOutput: true, ...(options.log ? { log: options.log } : {}) });
  const address = await api.listen();
  const rootUrl = address.replace('[::1]', '127.0.0.1');
  config.rootUrl = rootUrl;
  const root = { clientId: ROOT_CLIENT_ID, accessToken: rootAccessToken };
  return {
    rootUrl,
    api,
    db,
    config,
    root,
    async request(method, path, body, credentials = root) {
      const url = `${rootUrl}${path}`;
      const headers: Record<string, string> = {};
      if (body !== undefined) headers['content-type'] = 'application/json';
      if (credentials) headers.authorization = hawkHeader(url, method, credentials);
      const res = await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        redirect: 'manual',
      });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      return { status: res.status, body: parsed, headers: res.headers };
    },
    async close() {
      await api.close();
      await db.drop();
    },
  };
}
