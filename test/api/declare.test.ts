import { test } from 'node:test';
import assert from 'node:assert/strict';
import { declare } from '../../src/api/endpoint.js';
import { ROUTE_PARAMS, SLUGID, RUN_ID } from '../../src/api/patterns.js';
import { apiEndpoints } from '../../src/processes/api.js';

const base = { service: 'queue', name: 'x', title: 'x', description: 'x', method: 'get', async handler() {} } as const;

test('declare() gives each route parameter its pattern from ROUTE_PARAMS; a declared one wins; others stay unchecked', () => {
  const e = declare({ ...base, route: '/task/<taskId>/runs/<runId>/by/<label>' });
  assert.equal(e.params?.taskId, SLUGID);
  assert.equal(e.params?.runId, RUN_ID);
  assert.equal(e.params?.label, undefined, 'a parameter the table does not know is left to its endpoint');
  const own = /^[0-9]$/;
  assert.equal(declare({ ...base, route: '/task/<taskId>/runs/<runId>', params: { runId: own } }).params?.runId, own);
  assert.equal(declare({ ...base, route: '/a', aliases: ['/b/<taskQueueId>'] }).params?.taskQueueId, ROUTE_PARAMS.taskQueueId, 'aliases count too');
});

test('every served endpoint checks every route parameter the table names', () => {
  for (const e of apiEndpoints) {
    for (const route of [e.route, ...(e.aliases ?? [])]) {
      for (const [, name] of route.matchAll(/<([A-Za-z]+)\*?>/g)) {
        if (ROUTE_PARAMS[name]) assert.ok(e.params?.[name], `${e.service}.${e.name}: ${name} has a pattern`);
      }
    }
  }
});
