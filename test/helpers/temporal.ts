import { startDevServer, type DevServer, type DevServerOptions } from '../../src/temporal/devServer.js';

export const TGS_SEARCH_ATTRIBUTES = { TaskGraphState: 'Keyword', TaskGraphSchedulerId: 'Keyword' } as const;

/** A real Temporal dev server (in-memory sqlite) of its own for one test file. */
export async function startTestTemporal(options: DevServerOptions = {}): Promise<DevServer> {
  return startDevServer({ searchAttributes: TGS_SEARCH_ATTRIBUTES, ...options });
}
