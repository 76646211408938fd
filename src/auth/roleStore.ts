import type pg from 'pg';
import { connectSession, notifyAfterCommit, withTransaction, type DbSession, type Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import type { ClientStore } from './authenticate.js';
import { scopeSatisfied } from './scopes.js';
import { ANONYMOUS_SCOPE, RoleError, ScopeExpander, validateRoles, type Role } from './roles.js';

/** Roles in Postgres (table `roles`, migration 016) and the per-process cache every request expands with. */
export interface RoleInfo {
  roleId: string;
  scopes: string[];
  description: string;
  created: string;
  lastModified: string;
}

export const ROLES_CHANNEL = 'tgs_roles';

interface RoleRow {
  role_id: string;
  scopes: string[];
  description: string;
  created: Date;
  last_modified: Date;
}

const COLUMNS = 'role_id, scopes, description, created, last_modified';

const toInfo = (r: RoleRow): RoleInfo => ({
  roleId: r.role_id,
  scopes: r.scopes,
  description: r.description,
  created: r.created.toISOString(),
  lastModified: r.last_modified.toISOString(),
});

export async function getRole(db: Queryable, roleId: string): Promise<RoleInfo | undefined> {
  const { rows } = await db.query<RoleRow>(`SELECT ${COLUMNS} FROM roles WHERE role_id = $1`, [roleId]);
  return rows[0] ? toInfo(rows[0]) : undefined;
}

/** Roles in roleId order after `after`; every role without a limit. */
export async function listRoles(db: Queryable, options: { after?: string; limit?: number } = {}): Promise<RoleInfo[]> {
  const { rows } = await db.query<RoleRow>(`SELECT ${COLUMNS} FROM roles WHERE role_id > $1 ORDER BY role_id LIMIT $2`, [
    options.after ?? '',
    options.limit ?? null,
  ]);
  return rows.map(toInfo);
}

const sortedScopes = (scopes: string[]) => [...new Set(scopes)].sort();

function asInputError(err: unknown): never {
  if (err instanceof RoleError) throw new TgsError('InputError', err.message, err.details);
  throw err;
}

/**
 * Runs a role change with the roles_generation row locked (role changes are serialized, so the cycle
 * check sees every other role), bumps the generation and NOTIFYs every API process after the commit.
 */
async function changeRoles<T>(pool: pg.Pool, fn: (client: pg.PoolClient, roles: Role[]) => Promise<T>): Promise<T> {
  return withTransaction(pool, async (client) => {
    await client.query('SELECT generation FROM roles_generation FOR UPDATE');
    const { rows } = await client.query<{ role_id: string; scopes: string[] }>('SELECT role_id, scopes FROM roles');
    const result = await fn(client, rows.map((r) => ({ roleId: r.role_id, scopes: r.scopes })));
    await client.query('UPDATE roles_generation SET generation = generation + 1');
    await notifyAfterCommit(client, ROLES_CHANNEL, ['']);
    return result;
  });
}

/**
 * Creates a role. The same request again answers with the existing role; another description or other
 * scopes for an existing roleId are a 409 (Taskcluster). Refuses roles that would make a dependency cycle.
 */
/** Run by a role change's transaction once the change is made (the auth API writes its audit row): not for a repeat. */
export type RoleChanged = (client: Queryable) => Promise<void>;

export async function createRole(
  pool: pg.Pool,
  roleId: string,
  input: { description: string; scopes: string[] },
  changed: RoleChanged = async () => undefined,
): Promise<RoleInfo> {
  const scopes = sortedScopes(input.scopes);
  return changeRoles(pool, async (client, roles) => {
    const existing = await getRole(client, roleId);
    if (existing) {
      if (existing.description !== input.description || existing.scopes.join('\n') !== scopes.join('\n')) {
        throw new TgsError('RequestConflict', `Role with roleId '${roleId}' already exists`, { roleId });
      }
      return existing;
    }
    try {
      validateRoles([...roles, { roleId, scopes }]);
    } catch (err) {
      asInputError(err);
    }
    const { rows } = await client.query<RoleRow>(
      `INSERT INTO roles (role_id, scopes, description) VALUES ($1, $2, $3) RETURNING ${COLUMNS}`,
      [roleId, scopes, input.description],
    );
    await changed(client);
    return toInfo(rows[0]);
  });
}

/**
 * Replaces a role's description and scopes. `authorizeAdded` gets the scopes the former role (expanded)
 * did not already grant, and throws when the caller may not add them (Taskcluster's rule).
 */
export async function updateRole(
  pool: pg.Pool,
  roleId: string,
  input: { description: string; scopes: string[] },
  authorizeAdded: (scopesAdded: string[]) => void,
  changed: RoleChanged = async () => undefined,
): Promise<RoleInfo> {
  const scopes = sortedScopes(input.scopes);
  return changeRoles(pool, async (client, roles) => {
    const former = roles.find((r) => r.roleId === roleId);
    if (!former) throw new TgsError('ResourceNotFound', `Role with roleId '${roleId}' not found`, { roleId });
    const formerScopes = new ScopeExpander(roles).expand(former.scopes);
    authorizeAdded(scopes.filter((s) => !scopeSatisfied(formerScopes, s)));
    try {
      validateRoles([...roles.filter((r) => r !== former), { roleId, scopes }]);
    } catch (err) {
      asInputError(err);
    }
    const { rows } = await client.query<RoleRow>(
      `UPDATE roles SET scopes = $2, description = $3, last_modified = now() WHERE role_id = $1 RETURNING ${COLUMNS}`,
      [roleId, scopes, input.description],
    );
    await changed(client);
    return toInfo(rows[0]);
  });
}

/** Deletes a role; deleting one that does not exist succeeds (Taskcluster), and `changed` runs only when one did. */
export async function deleteRole(pool: pg.Pool, roleId: string, changed: RoleChanged = async () => undefined): Promise<void> {
  await changeRoles(pool, async (client) => {
    const { rowCount } = await client.query('DELETE FROM roles WHERE role_id = $1', [roleId]);
    if ((rowCount ?? 0) > 0) await changed(client);
  });
}

/**
 * The roles of one API process, and the expansion every request's scopes go through.
 *
 * Freshness: a role change commits with a bumped `roles_generation` (and a NOTIFY on `tgs_roles`).
 * - Requests signed by a stored client (or by temporary credentials it issued) read the generation in the same
 *   statement that reads the client (src/auth/clients.ts), so a change holds from the very next such request in
 *   every API process, at no extra round trip.
 * - Requests whose client is not read from Postgres (the root client, `*` anyway; the run credentials the queue
 *   issues to workers) rely on the NOTIFY: every process LISTENs and a notification marks the cache stale
 *   (it arrives within about a millisecond of the commit here). As a bound for a notification lost while the
 *   LISTEN connection reconnects, the generation is read again when the last check is older than `boundMs`
 *   (1 s), and on every request while not listening.
 * A stale cache costs one single-row SELECT; the roles themselves are read only when the generation moved.
 * Expanding a worker's run credentials (5 scopes + `assume:anonymous`, cached assume set) measured 70 µs on the
 * development machine at load average 27 on 2 cores, where a 10^6-iteration Set.has loop took 341 ms (about
 * 17 times its unloaded time), so a few µs unloaded; a request expands two or three times.
 * A separate generation query on every request would add a round trip to every call — claimWork and the reports
 * (signed by the issuer's run credentials) included — for changes that happen a few times a day.
 */
export class RoleCache {
  private expander = new ScopeExpander([]);
  private generation = -1;
  private checkedAt = 0;
  private stale = true;
  private session: DbSession | undefined;
  private reconnectAt = 0;
  private loading: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly databaseUrl: string,
    private readonly boundMs = 1000,
  ) {}

  async start(): Promise<void> {
    await this.listen();
    await this.refresh();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const session = this.session;
    this.session = undefined;
    // a dead pg.Client may still emit 'error': an unheard one would kill the process
    session?.removeAllListeners().on('error', () => undefined);
    await session?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    this.reconnectAt = Date.now() + 5000;
    try {
      const session = await connectSession(this.databaseUrl);
      const lost = () => {
        if (this.session !== session) return;
        this.session = undefined;
        this.stale = true;
        session.removeAllListeners().on('error', () => undefined);
        session.end().catch(() => undefined);
      };
      session.on('notification', () => {
        this.stale = true;
      });
      session.on('error', lost);
      session.on('end', lost);
      await session.query(`LISTEN ${ROLES_CHANNEL}`);
      if (this.stopped) {
        await session.end().catch(() => undefined);
        return;
      }
      this.session = session;
      this.stale = true;
    } catch {
      // not listening: every request checks the generation until a reconnect succeeds
    }
  }

  /** A generation read elsewhere (with a client's record): a newer one than loaded makes the cache stale. */
  observe(generation: number): void {
    if (generation !== this.generation) this.stale = true;
  }

  /** Marks the cache stale: the process that changed a role calls it before answering. */
  invalidate(): void {
    this.stale = true;
  }

  /** The expander for the current roles, reloaded first when they may have changed. */
  async current(): Promise<ScopeExpander> {
    if (!this.session && !this.stopped && Date.now() >= this.reconnectAt) void this.listen();
    const due = this.stale || !this.session || Date.now() - this.checkedAt > this.boundMs;
    if (due) await this.refresh();
    // a change notified while that load was already reading: read again
    if (this.stale) await this.refresh();
    return this.expander;
  }

  /** A request's scopes, with `assume:anonymous` (every client holds it) and every role they assume. */
  async expand(scopes: readonly string[]): Promise<string[]> {
    return (await this.current()).expand([...scopes, ANONYMOUS_SCOPE]);
  }

  private refresh(): Promise<void> {
    // One reload at a time; callers that arrive meanwhile wait for it.
    this.loading ??= this.load().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async load(): Promise<void> {
    this.stale = false;
    try {
      await this.read();
    } catch (err) {
      this.stale = true; // the next request tries again
      throw err;
    }
  }

  private async read(): Promise<void> {
    const started = Date.now();
    const { rows } = await this.pool.query<{ generation: number }>('SELECT generation FROM roles_generation');
    const generation = rows[0].generation;
    if (generation !== this.generation) {
      const roles = await this.pool.query<{ generation: number; roles: Role[] | null }>(
        `SELECT g.generation, (SELECT json_agg(json_build_object('roleId', role_id, 'scopes', scopes)) FROM roles) AS roles
         FROM roles_generation g`,
      );
      this.expander = new ScopeExpander(roles.rows[0].roles ?? []);
      this.generation = roles.rows[0].generation;
    }
    this.checkedAt = started;
  }
}

/**
 * Scopes expanded through the roles as they are in Postgres now, `assume:anonymous` included as for every HTTP
 * request: for a process without a RoleCache (the scheduler worker checking TGS_TEMPORAL_CLIENT_ID), read once a
 * call.
 */
export async function expandWithStoredRoles(db: Queryable, scopes: readonly string[]): Promise<string[]> {
  const { rows } = await db.query<{ roles: Role[] | null }>(
    `SELECT json_agg(json_build_object('roleId', role_id, 'scopes', scopes)) AS roles FROM roles`,
  );
  return new ScopeExpander(rows[0].roles ?? []).expand([...scopes, ANONYMOUS_SCOPE]);
}

/** A client store whose clients carry their expanded scopes (what a certificate's issuer is checked against). */
export function expandingClientStore(store: ClientStore, roles: RoleCache): ClientStore {
  return {
    async get(clientId) {
      const client = await store.get(clientId);
      if (client?.rolesGeneration !== undefined) roles.observe(client.rolesGeneration);
      return client && { ...client, scopes: await roles.expand(client.scopes) };
    },
  };
}
