import { readFileSync } from 'node:fs';
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config.js';

/** Connection options for a dev server, a self-hosted cluster, or a hosted namespace (TLS / API key). */
export function connectionOptions(config: Config) {
  const tls =
    config.temporalTlsCert && config.temporalTlsKey
      ? { clientCertPair: { crt: readFileSync(config.temporalTlsCert), key: readFileSync(config.temporalTlsKey) } }
      : config.temporalApiKey
        ? true
        : undefined;
  return {
    address: config.temporalAddress,
    ...(tls ? { tls } : {}),
    ...(config.temporalApiKey ? { apiKey: config.temporalApiKey } : {}),
  };
}

/**
 * A Temporal client connected on first use, so the API starts (and serves the queue) while Temporal
 * is still coming up; a failed connection is retried on the next use.
 */
export class LazyTemporalClient {
  private pending: Promise<Client> | undefined;
  private connection: Connection | undefined;

  constructor(private readonly config: Config) {}

  get(): Promise<Client> {
    this.pending ??= (async () => {
      try {
        this.connection = await Connection.connect(connectionOptions(this.config));
        return new Client({ connection: this.connection, namespace: this.config.temporalNamespace });
      } catch (err) {
        this.pending = undefined;
        throw err;
      }
    })();
    return this.pending;
  }

  async close(): Promise<void> {
    await this.connection?.close();
  }
}
