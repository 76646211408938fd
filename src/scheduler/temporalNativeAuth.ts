import type { Config } from '../config.js';
import { ROOT_CLIENT_ID } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { generateAccessToken, getClient } from '../auth/clients.js';
import { requireScopes } from '../auth/requireScopes.js';
import { expandWithStoredRoles } from '../auth/roleStore.js';
import type { ScopeExpression } from '../auth/scopes.js';

/**
 * What a graph started directly on Temporal may do: exactly what the client TGS_TEMPORAL_CLIENT_ID may do over
 * HTTP. Access to the Temporal namespace is not a tgs credential, so without that setting such graphs are
 * refused. The client is read from Postgres at every start: a changed, disabled, expired or deleted client counts at
 * once, and its scopes are expanded through the roles as an HTTP request's are.
 */
export async function temporalGraphAuthorizer(config: Config, db: Queryable): Promise<(expr: ScopeExpression) => void> {
  const clientId = config.temporalClientId;
  if (!clientId) {
    throw new TgsError(
      'AuthenticationFailed',
      'graphs started directly on Temporal are refused: set TGS_TEMPORAL_CLIENT_ID on the scheduler worker to a tgs client whose scopes cover them (scheduler:create-task-graph and what createTask needs for each task), or submit the graph over HTTP',
    );
  }
  if (clientId === ROOT_CLIENT_ID) {
    throw new TgsError('AuthenticationFailed', `TGS_TEMPORAL_CLIENT_ID must not be ${ROOT_CLIENT_ID}: give Temporal-native graphs a client with limited scopes`);
  }
  const client = await getClient(db, clientId);
  if (!client) throw new TgsError('AuthenticationFailed', `TGS_TEMPORAL_CLIENT_ID names client ${clientId}, which does not exist: create it (tgs client create ${clientId} -s ...)`);
  if (new Date(client.expires).getTime() < Date.now()) {
    throw new TgsError('AuthenticationFailed', `client ${clientId} (TGS_TEMPORAL_CLIENT_ID) expired at ${client.expires}`);
  }
  if (client.disabled) {
    throw new TgsError('AuthenticationFailed', `client ${clientId} (TGS_TEMPORAL_CLIENT_ID) is disabled: enable it (POST /api/auth/v1/clients/<clientId>/enable) to accept graphs started on Temporal again`);
  }
  const scopes = await expandWithStoredRoles(db, client.scopes);
  return (expr) => {
    try {
      requireScopes(clientId, scopes, expr);
    } catch (err) {
      if (!(err instanceof TgsError)) throw err;
      throw new TgsError(err.code, `a graph started on Temporal acts as TGS_TEMPORAL_CLIENT_ID; ${err.message}`, err.details);
    }
  };
}

/** The client `tgs dev` gives Temporal-native graphs when TGS_TEMPORAL_CLIENT_ID is not set. */
export const DEV_TEMPORAL_CLIENT_ID = 'static/tgs/dev-temporal';

/**
 * What dev graphs need and no more: create and amend graphs (the `amendGraph` update), and tasks of this scheduler for
 * the dev workers' provisioner at any priority (`highest` serves every lower one). No task scopes, no routes, nothing
 * of other provisioners.
 */
export const devTemporalScopes = (config: Config, provisionerId: string) => [
  'scheduler:create-task-graph',
  'scheduler:amend-task-graph:*',
  `queue:scheduler-id:${config.schedulerId}`,
  `queue:create-task:highest:${provisionerId}/*`,
];

/** Creates the dev client, or sets its scopes to today's (a changed TGS_SCHEDULER_ID), keeping its token. */
export async function ensureDevTemporalClient(db: Queryable, config: Config, provisionerId: string): Promise<string[]> {
  const scopes = devTemporalScopes(config, provisionerId);
  await db.query(
    `INSERT INTO clients (client_id, access_token, scopes, description, expires)
     VALUES ($1, $2, $3, 'tgs dev: what graphs started directly on Temporal act as', '9999-12-31')
     ON CONFLICT (client_id) DO UPDATE SET scopes = excluded.scopes`,
    [DEV_TEMPORAL_CLIENT_ID, generateAccessToken(), scopes],
  );
  return scopes;
}
