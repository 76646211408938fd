import { Connection } from '@temporalio/client';
import protoModule from '@temporalio/proto';
import type { Config } from '../config.js';
import { connectionOptions } from './connection.js';
import { SEARCH_ATTRIBUTES } from '../workflows/contract.js';

/**
 * Registers the search attributes the workflow upserts when the namespace lacks them, so a stock
 * Temporal server needs no hand set-up. A server that refuses (a hosted namespace) gets a clear message.
 */
export async function ensureSearchAttributes(config: Config): Promise<void> {
  const connection = await Connection.connect(connectionOptions(config));
  try {
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: config.temporalNamespace });
    const missing = Object.values(SEARCH_ATTRIBUTES).map((key) => key.name).filter((name) => !(name in (customAttributes ?? {})));
    if (missing.length === 0) return;
    try {
      await connection.operatorService.addSearchAttributes({
        namespace: config.temporalNamespace,
        searchAttributes: Object.fromEntries(missing.map((n) => [n, protoModule.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD])),
      });
    } catch (err) {
      throw new Error(
        `the Temporal namespace ${config.temporalNamespace} lacks the search attributes ${missing.join(', ')} (type Keyword) and refused to add them (${(err as Error).message}); add them in your Temporal namespace settings`,
      );
    }
    await untilSearchable(connection, config.temporalNamespace, missing);
  } finally {
    await connection.close();
  }
}

/**
 * Waits until the server accepts a query naming the attributes just added. A server on SQL visibility (a Temporal
 * cluster on Postgres) applies them through each service's namespace cache, and until then refuses what names them:
 * on the cluster of support/temporalCluster.ts a workflow start with TaskGraphState was refused ("Namespace default
 * has no mapping defined for search attribute TaskGraphState") for about a second after the add, which made the
 * API's first graphs answer 503. The query goes through the same cache as a start.
 */
async function untilSearchable(connection: Connection, namespace: string, names: string[], timeoutMs = 60_000): Promise<void> {
  const query = names.map((name) => `${name} = ''`).join(' AND ');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await connection.workflowService.listWorkflowExecutions({ namespace, query, pageSize: 1 });
      return;
    } catch (err) {
      if (Date.now() > deadline) {
        throw new Error(`added the search attributes ${names.join(', ')} to the Temporal namespace ${namespace}, but ${timeoutMs / 1000} s later the server still refuses a query naming them (${(err as Error).message})`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
