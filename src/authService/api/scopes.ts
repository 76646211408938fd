import { declare } from '../../api/endpoint.js';
import { scopeSet } from './schemas.js';

export const currentScopes = declare({
  service: 'auth',
  name: 'currentScopes',
  title: 'Get Current Scopes',
  description:
    'The scopes of the request, expanded through the roles: the client\'s scopes, or those of its temporary ' +
    'credentials, restricted by `authorizedScopes`, plus `assume:anonymous` (every request holds it). Taskcluster\'s path is `/scopes/current`; `/current-scopes` is an alias.',
  method: 'get',
  route: '/scopes/current',
  aliases: ['/current-scopes'],
  scopes: 'auth:current-scopes',
  output: scopeSet,
  async handler({ auth }) {
    return { scopes: auth.scopes };
  },
});
