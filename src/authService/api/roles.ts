import type { ApiDeps } from '../../api/deps.js';
import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { createRole as createRoleRow, deleteRole as deleteRoleRow, getRole, listRoles as listRoleRows, updateRole as updateRoleRow, type RoleInfo } from '../../auth/roleStore.js';
import { AUDIT_ACTION, auditClientId, recordAudit, type AuditAction } from '../../auth/audit.js';
import type { AuthContext } from '../../auth/authenticate.js';
import type { RoleChanged } from '../../auth/roleStore.js';
import { createRoleRequest, getRoleResponse, listRoleIdsResponse, listRoles2Response, listRolesResponse, refuseDoubleStar, scopeSet, scopeSetInput } from './schemas.js';

/** Taskcluster's roleId: printable ASCII. */

interface RoleRequest {
  description: string;
  scopes: string[];
}

/** A role as the API shows it: with the scopes `assume:<roleId>` expands to. */
async function roleToJson(deps: ApiDeps, role: RoleInfo) {
  const expander = await deps.roles.current();
  return { ...role, expandedScopes: expander.expand([`assume:${role.roleId}`]) };
}

/** Writes a role change's audit row, in the change's transaction (who: the caller). */
const auditRole =
  (auth: AuthContext, roleId: string, action: AuditAction): RoleChanged =>
  (tx) =>
    recordAudit(tx, { entityType: 'role', entityId: roleId, clientId: auditClientId(auth.clientId), action });

const readRolePage = (deps: ApiDeps, query: Record<string, string | undefined>) =>
  readPage(query, (after, limit) => listRoleRows(deps.pool, { after, limit }), (r) => r.roleId);

export const listRoles = declare({
  service: 'auth',
  name: 'listRoles',
  title: 'List Roles (no pagination)',
  description: 'Every role, with its scopes and expanded scopes, in roleId order.',
  method: 'get',
  route: '/roles/',
  scopes: 'auth:list-roles',
  output: listRolesResponse,
  async handler({ deps }) {
    const roles = await listRoleRows(deps.pool);
    return Promise.all(roles.map((r) => roleToJson(deps, r)));
  },
});

export const listRoles2 = declare({
  service: 'auth',
  name: 'listRoles2',
  title: 'List Roles',
  description: 'Roles in roleId order, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/roles2/',
  query: PAGE_QUERY,
  scopes: 'auth:list-roles',
  output: listRoles2Response,
  async handler({ deps, query }) {
    const { page, next } = await readRolePage(deps, query);
    return { roles: await Promise.all(page.map((r) => roleToJson(deps, r))), ...next };
  },
});

export const listRoleIds = declare({
  service: 'auth',
  name: 'listRoleIds',
  title: 'List Role IDs',
  description: 'RoleIds in order, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/roleids/',
  query: PAGE_QUERY,
  scopes: 'auth:list-roles',
  output: listRoleIdsResponse,
  async handler({ deps, query }) {
    const { page, next } = await readRolePage(deps, query);
    return { roleIds: page.map((r) => r.roleId), ...next };
  },
});

export const role = declare({
  service: 'auth',
  name: 'role',
  title: 'Get Role',
  description: 'A role: its scopes, and the scopes `assume:<roleId>` expands to.',
  method: 'get',
  route: '/roles/<roleId>',
  scopes: 'auth:get-role:<roleId>',
  output: getRoleResponse,
  async handler({ params, deps }) {
    const found = await getRole(deps.pool, params.roleId);
    if (!found) throw new TgsError('ResourceNotFound', `Role with roleId '${params.roleId}' not found`, { roleId: params.roleId });
    return roleToJson(deps, found);
  },
});

export const createRole = declare<RoleRequest>({
  service: 'auth',
  name: 'createRole',
  title: 'Create Role',
  description:
    'Create a role; a client holding `assume:<roleId>` gets its scopes from the next request on, in every API ' +
    'process. The caller needs `auth:create-role:<roleId>` and every scope the role grants. The same request ' +
    'again answers with the role; other settings for an existing roleId are a 409. A role that would take part in ' +
    'a dependency cycle (roles assuming each other) is refused.',
  method: 'put',
  route: '/roles/<roleId>',
  scopes: { AllOf: ['auth:create-role:<roleId>', { for: 'scope', in: 'scopes', each: '<scope>' }] },
  input: createRoleRequest,
  output: getRoleResponse,
  async handler({ params, body, deps, auth, authorize }) {
    refuseDoubleStar(body.scopes);
    authorize({ scopes: body.scopes });
    const created = await createRoleRow(deps.pool, params.roleId, body, auditRole(auth, params.roleId, AUDIT_ACTION.created));
    deps.roles.invalidate();
    return roleToJson(deps, created);
  },
});

export const updateRole = declare<RoleRequest>({
  service: 'auth',
  name: 'updateRole',
  title: 'Update Role',
  description:
    'Replace a role\'s description and scopes. The caller needs `auth:update-role:<roleId>` and every scope added ' +
    '(those the role, expanded, did not already grant); it need not hold the scopes the role keeps.',
  method: 'post',
  route: '/roles/<roleId>',
  scopes: { AllOf: ['auth:update-role:<roleId>', { for: 'scope', in: 'scopesAdded', each: '<scope>' }] },
  input: createRoleRequest,
  output: getRoleResponse,
  async handler({ params, body, deps, auth, authorize }) {
    refuseDoubleStar(body.scopes);
    const updated = await updateRoleRow(
      deps.pool,
      params.roleId,
      body,
      (scopesAdded) => authorize({ scopesAdded }),
      auditRole(auth, params.roleId, AUDIT_ACTION.updated),
    );
    deps.roles.invalidate();
    return roleToJson(deps, updated);
  },
});

export const deleteRole = declare({
  service: 'auth',
  name: 'deleteRole',
  title: 'Delete Role',
  description: 'Delete a role; clients assuming it lose its scopes from the next request on. Deleting a role that does not exist succeeds.',
  method: 'delete',
  route: '/roles/<roleId>',
  scopes: 'auth:delete-role:<roleId>',
  async handler({ params, deps, auth }) {
    await deleteRoleRow(deps.pool, params.roleId, auditRole(auth, params.roleId, AUDIT_ACTION.deleted));
    deps.roles.invalidate();
    return {};
  },
});

export const expandScopes = declare<{ scopes: string[] }>({
  service: 'auth',
  name: 'expandScopes',
  title: 'Expand Scopes',
  description: 'The scopes a set of scopes expands to through the roles, normalized (scopes a `*` scope covers left out).',
  method: 'post',
  route: '/scopes/expand',
  scopes: 'auth:expand-scopes',
  input: scopeSetInput,
  output: scopeSet,
  async handler({ body, deps }) {
    return { scopes: (await deps.roles.current()).expand(body.scopes) };
  },
});
