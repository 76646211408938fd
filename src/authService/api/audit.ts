import { declare } from '../../api/endpoint.js';
import type { JsonSchema } from '../../api/endpoint.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { TgsError } from '../../errors.js';
import { AUDIT_ENTITY_TYPE, listAudit } from '../../auth/audit.js';
import type { Queryable } from '../../db/pool.js';

/** Taskcluster's get-entity-history-response. */
const entityHistoryResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['auditHistory'],
  properties: {
    auditHistory: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['clientId', 'actionType', 'created', 'entityId', 'entityType'],
        properties: {
          clientId: { type: 'string' },
          actionType: { type: 'string' },
          created: { type: 'string', format: 'date-time' },
          entityId: { type: 'string' },
          entityType: { type: 'string' },
        },
      },
    },
    continuationToken: { type: 'string' },
  },
};

/** An entity's id: printable ASCII (client and role ids are), not longer than a hook's `<hookGroupId>/<hookId>`. */
const ENTITY_ID = /^[\x20-\x7e]{1,2048}$/;

/** A page's rows in the order they were written; the token is the last row's id. */
async function auditPage(db: Queryable, query: Record<string, string | undefined>, where: Parameters<typeof listAudit>[1]) {
  const { page, next } = await readPage(
    query,
    (after, limit) => {
      if (after !== '' && !/^[0-9]{1,18}$/.test(after)) {
        throw new TgsError('InputError', 'Invalid continuationToken: pass the one from the previous page unchanged');
      }
      return listAudit(db, where, after === '' ? '0' : after, limit);
    },
    (row) => row.id,
  );
  return { auditHistory: page.map(({ id: _id, ...entry }) => entry), ...next };
}

export const getEntityHistory = declare({
  service: 'auth',
  name: 'getEntityHistory',
  title: 'Get Entity History',
  description:
    'The audit history of a client or a role (`entityType` `client` or `role`): who changed it, how (`created`, ' +
    '`updated`, `deleted`, `client enabled`, `client disabled`, `access token reset`, `expired`) and when, oldest ' +
    'first, paged (limit ≤ 1000, continuationToken). Rows are kept 30 days. tgs records no secrets, hooks or worker ' +
    'pools, so their histories are empty.',
  method: 'get',
  route: '/audit/<entityType>/<entityId>',
  params: { entityType: AUDIT_ENTITY_TYPE, entityId: ENTITY_ID },
  query: PAGE_QUERY,
  scopes: 'auth:audit-history:<entityType>',
  output: entityHistoryResponse,
  async handler({ params, query, deps }) {
    return auditPage(deps.pool, query, { entity: { type: params.entityType, id: params.entityId } });
  },
});

export const listAuditHistory = declare({
  service: 'auth',
  name: 'listAuditHistory',
  title: 'List Audit History',
  description:
    'The changes a client made to clients and roles (the audit rows whose `clientId` is it), oldest first, paged ' +
    '(limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/clients/<clientId>/audit',
  query: PAGE_QUERY,
  scopes: 'auth:client-audit-history:<clientId>',
  output: entityHistoryResponse,
  async handler({ params, query, deps }) {
    return auditPage(deps.pool, query, { clientId: params.clientId });
  },
});
