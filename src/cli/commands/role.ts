import type { Command } from 'commander';
import { ApiClient, TgsApiError } from '../../client/http.js';
import { describeApiError, requireCredentials, type ResolvedCredentials } from '../../client/credentials.js';
import { withClient } from '../withClient.js';

/**
 * `tgs role …`: roles through the auth API. A hook fires with the scopes of its role `hook-id:<group>/<hook>`, so
 * `tgs hook create` prints the `tgs role grant` that lets it create its task.
 */

interface RoleInfo {
  roleId: string;
  description: string;
  scopes: string[];
  expandedScopes: string[];
  created: string;
  lastModified: string;
}

const rolePath = (roleId: string) => `/roles/${encodeURIComponent(roleId)}`;
const collect = (value: string, previous: string[]) => [...previous, value];

const call = <T>(resolved: ResolvedCredentials, method: string, path: string, body?: unknown) =>
  withClient(resolved, (c) => c.api.request<T>('auth', method, path, body));

/** The role, or undefined when there is none (any other failure goes through). */
export async function findRole(resolved: ResolvedCredentials, roleId: string): Promise<RoleInfo | undefined> {
  try {
    return await new ApiClient(resolved.rootUrl, resolved.credentials).request<RoleInfo>('auth', 'GET', rolePath(roleId));
  } catch (err) {
    if (err instanceof TgsApiError && err.status === 404) return undefined;
    throw new Error(describeApiError(err, resolved));
  }
}

function show(role: RoleInfo): void {
  console.log(`roleId       ${role.roleId}`);
  console.log(`scopes       ${role.scopes.length ? role.scopes.join('\n             ') : '(none)'}`);
  const implied = role.expandedScopes.filter((s) => !role.scopes.includes(s) && s !== `assume:${role.roleId}`);
  if (implied.length) console.log(`expands to   ${implied.join('\n             ')}`);
  if (role.description) console.log(`description  ${role.description}`);
  console.log(`modified     ${role.lastModified}`);
}

export function registerRoleCommand(program: Command): void {
  const role = program
    .command('role')
    .description('manage roles (named sets of scopes; `assume:<roleId>` grants them) through the auth API; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');

  role
    .command('create <roleId>')
    .description('create a role with scopes (a hook fires with the role hook-id:<hookGroupId>/<hookId>)')
    .option('-s, --scope <scope>', 'a scope the role grants (repeat for more)', collect, [] as string[])
    .option('-d, --description <text>', 'what the role is for', '')
    .option('--json', 'print the API response as JSON')
    .action(async (roleId: string, opts: { scope: string[]; description: string; json?: boolean }) => {
      const resolved = requireCredentials();
      if (await findRole(resolved, roleId)) throw new Error(`role ${roleId} exists: add scopes with tgs role grant ${roleId} <scope>…`);
      const body = { description: opts.description || `created with tgs role create by ${resolved.credentials.clientId}`, scopes: opts.scope };
      const created = await call<RoleInfo>(resolved, 'PUT', rolePath(roleId), body);
      if (opts.json) console.log(JSON.stringify(created, null, 2));
      else show(created);
    });

  role
    .command('grant <roleId> <scope...>')
    .description('add scopes to a role, creating it when there is none')
    .action(async (roleId: string, scopes: string[]) => {
      const resolved = requireCredentials();
      const existing = await findRole(resolved, roleId);
      const updated = existing
        ? await call<RoleInfo>(resolved, 'POST', rolePath(roleId), { description: existing.description, scopes: [...new Set([...existing.scopes, ...scopes])] })
        : await call<RoleInfo>(resolved, 'PUT', rolePath(roleId), { description: `created with tgs role grant by ${resolved.credentials.clientId}`, scopes });
      show(updated);
    });

  role
    .command('list')
    .description('list roles (roleId, scopes)')
    .option('-p, --prefix <prefix>', 'only roles whose roleId starts with this')
    .option('--json', 'print the roles as JSON')
    .action(async (opts: { prefix?: string; json?: boolean }) => {
      const resolved = requireCredentials();
      const roles: RoleInfo[] = [];
      let token: string | undefined;
      do {
        const page = await call<{ roles: RoleInfo[]; continuationToken?: string }>(resolved, 'GET', `/roles2/${token ? `?continuationToken=${encodeURIComponent(token)}` : ''}`);
        roles.push(...page.roles.filter((r) => !opts.prefix || r.roleId.startsWith(opts.prefix)));
        token = page.continuationToken;
      } while (token);
      if (opts.json) {
        console.log(JSON.stringify(roles, null, 2));
        return;
      }
      if (roles.length === 0) {
        console.log(opts.prefix ? `no roles start with ${opts.prefix} (create one: tgs role create <roleId> --scope <scope>)` : 'no roles (create one: tgs role create <roleId> --scope <scope>)');
        return;
      }
      const width = Math.max(...roles.map((r) => r.roleId.length), 'ROLE ID'.length);
      console.log(`${'ROLE ID'.padEnd(width)}  SCOPES`);
      for (const r of roles) console.log(`${r.roleId.padEnd(width)}  ${r.scopes.join(' ') || '-'}`);
    });

  role
    .command('show <roleId>')
    .description('a role: its scopes and what they expand to')
    .option('--json', 'print the API response as JSON')
    .action(async (roleId: string, opts: { json?: boolean }) => {
      const resolved = requireCredentials();
      const found = await findRole(resolved, roleId);
      if (!found) throw new Error(`no role ${roleId} (see \`tgs role list\`; create it with tgs role create ${roleId} --scope <scope>)`);
      if (opts.json) console.log(JSON.stringify(found, null, 2));
      else show(found);
    });
}
