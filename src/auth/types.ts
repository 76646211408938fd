import type { Certificate } from './temporaryCredentials.js';

// What authenticate.ts, the client store and the certificate cache share: the records and the decoded `ext`.

export interface ClientRecord {
  clientId: string;
  accessToken: string;
  scopes: string[];
  expires?: Date;
  /** A disabled client cannot authenticate (auth API disableClient). */
  disabled?: boolean;
  /** The roles generation read with the record, when it was read from Postgres. */
  rolesGeneration?: number;
}

export interface ClientStore {
  get(clientId: string): Promise<ClientRecord | undefined>;
}

/** The Hawk `ext`, decoded. */
export interface ExtContent {
  certificate?: Certificate | string;
  authorizedScopes?: unknown;
}

