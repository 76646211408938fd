import { startDevServer, TGS_SEARCH_ATTRIBUTES, type DevServer, type DevServerOptions } from '../src/temporal/devServer.js';

/** A real Temporal dev server (in-memory sqlite) of its own for one test file. */
export async function startTestTemporal(options: DevServerOptions = {}): Promise<DevServer> {
  return startDevServer({ searchAttributes: TGS_SEARCH_ATTRIBUTES, ...options });
}
