import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Connection } from '@temporalio/client';
import { startTestTemporal } from '../../support/temporal.js';
import { SEARCH_ATTRIBUTES } from '../../src/workflows/contract.js';

test('the Temporal dev server starts with the tgs search attributes and stops cleanly', async () => {
  const server = await startTestTemporal();
  try {
    const connection = await Connection.connect({ address: server.address });
    const custom = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
    for (const { name } of Object.values(SEARCH_ATTRIBUTES)) assert.ok(Object.keys(custom.customAttributes ?? {}).includes(name), name);
    await connection.close();
  } finally {
    await server.stop();
  }
  assert.notEqual(server.process.exitCode ?? server.process.signalCode, null);
});
