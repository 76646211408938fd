import type { Command } from 'commander';
import { ApiClient, TgsApiError } from '../../client/http.js';
import { requireCredentials } from '../../client/credentials.js';
import { DurationError, parseDuration } from '../../duration.js';
import { withClient } from '../withClient.js';

interface ClientInfo {
  clientId: string;
  description: string;
  expires: string;
  scopes: string[];
  lastDateUsed: string;
  accessToken?: string;
}

/** `2026-01-01T00:00:00Z`, or a duration from now: `30d`, `12h`, `1 year`, `2 weeks`. */
export function parseExpires(value: string, now = Date.now()): string {
  const ms = durationMs(value);
  if (ms !== undefined && ms >= 0) return new Date(now + ms).toISOString();
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(date.getTime())) {
    throw new Error(`--expires ${JSON.stringify(value)}: give a date (2027-01-01T00:00:00Z) or a duration (30d, 12h, 1 year)`);
  }
  return date.toISOString();
}

function durationMs(value: string): number | undefined {
  try {
    return parseDuration(value);
  } catch (err) {
    if (err instanceof DurationError) return undefined;
    throw err;
  }
}

const path = (clientId: string) => `/clients/${encodeURIComponent(clientId)}`;
const collect = (value: string, previous: string[]) => [...previous, value];

function show(c: ClientInfo): void {
  console.log(`clientId     ${c.clientId}`);
  if (c.accessToken) console.log(`accessToken  ${c.accessToken}`);
  console.log(`expires      ${c.expires}`);
  console.log(`scopes       ${c.scopes.length ? c.scopes.join('\n             ') : '(none)'}`);
  if (c.description) console.log(`description  ${c.description}`);
}

export function registerClientCommand(program: Command): void {
  const client = program
    .command('client')
    .description('manage clients (credentials with scopes) through the auth API; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');

  client
    .command('create <clientId>')
    .description('create a client and print its access token (shown only once)')
    .option('-s, --scope <scope>', 'a scope to give the client (repeat for more)', collect, [] as string[])
    .option('-d, --description <text>', 'what the client is for', '')
    .option('-e, --expires <when>', 'expiry: a date or a duration from now (30d, 12h, 1 year)', '1 year')
    .option('--delete-on-expiration', 'delete the client once it has expired')
    .option('--json', 'print the API response as JSON')
    .action(async (clientId: string, opts: { scope: string[]; description: string; expires: string; deleteOnExpiration?: boolean; json?: boolean }) => {
      const resolved = requireCredentials();
      const body = {
        description: opts.description || `created with tgs client create by ${resolved.credentials.clientId}`,
        expires: parseExpires(opts.expires),
        scopes: opts.scope,
        deleteOnExpiration: Boolean(opts.deleteOnExpiration),
      };
      const created = await withClient(resolved, (c) => c.api.request<ClientInfo>('auth', 'PUT', path(clientId), body));
      if (opts.json) {
        console.log(JSON.stringify(created, null, 2));
        return;
      }
      show(created);
      console.log('');
      console.log('Store the access token now: it is not shown again (`tgs client reset` makes a new one). To use this client:');
      console.log(`  export TGS_ROOT_URL=${resolved.rootUrl}`);
      console.log(`  export TGS_CLIENT_ID=${created.clientId}`);
      console.log(`  export TGS_ACCESS_TOKEN=${created.accessToken}`);
    });

  client
    .command('list')
    .description('list clients (clientId, expiry, scopes)')
    .option('-p, --prefix <prefix>', 'only clients whose clientId starts with this')
    .option('--json', 'print the clients as JSON')
    .action(async (opts: { prefix?: string; json?: boolean }) => {
      const resolved = requireCredentials();
      const clients: ClientInfo[] = [];
      let token: string | undefined;
      do {
        const query = new URLSearchParams();
        if (opts.prefix) query.set('prefix', opts.prefix);
        if (token) query.set('continuationToken', token);
        const qs = query.toString();
        const page = await withClient(resolved, (c) =>
          c.api.request<{ clients: ClientInfo[]; continuationToken?: string }>('auth', 'GET', `/clients/${qs ? `?${qs}` : ''}`),
        );
        clients.push(...page.clients);
        token = page.continuationToken;
      } while (token);
      if (opts.json) {
        console.log(JSON.stringify(clients, null, 2));
        return;
      }
      if (clients.length === 0) {
        console.log(opts.prefix ? `no clients start with ${opts.prefix}` : 'no clients');
        return;
      }
      const width = Math.max(...clients.map((c) => c.clientId.length), 'CLIENT ID'.length);
      console.log(`${'CLIENT ID'.padEnd(width)}  EXPIRES                   SCOPES`);
      for (const c of clients) {
        console.log(`${c.clientId.padEnd(width)}  ${c.expires.padEnd(24)}  ${c.scopes.join(' ') || '-'}`);
      }
    });

  client
    .command('delete <clientId>')
    .description('delete a client; its credentials stop working at once')
    .action(async (clientId: string) => {
      const resolved = requireCredentials();
      // deleteClient succeeds for unknown clients (Taskcluster); look first so a typo is reported.
      const missing = await new ApiClient(resolved.rootUrl, resolved.credentials).request('auth', 'GET', path(clientId)).then(
        () => false,
        // anything but a 404 (no auth:get-client scope, server down) is left to the delete to report
        (err: unknown) => err instanceof TgsApiError && err.status === 404,
      );
      if (missing) throw new Error(`no client ${clientId} (see \`tgs client list\`)`);
      await withClient(resolved, (c) => c.api.request('auth', 'DELETE', path(clientId)));
      console.log(`deleted client ${clientId}`);
    });

  client
    .command('reset <clientId>')
    .description('give a client a new access token (the old one stops working) and print it')
    .action(async (clientId: string) => {
      const resolved = requireCredentials();
      const reset = await withClient(resolved, (c) => c.api.request<ClientInfo>('auth', 'POST', `${path(clientId)}/reset`));
      show(reset);
    });
}
