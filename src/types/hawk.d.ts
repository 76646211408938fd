// The parts of `hawk` tgs uses; the package ships no type declarations.
declare module 'hawk' {
  export interface Credentials {
    id: string;
    key: string;
    algorithm: 'sha256' | 'sha1';
    [extra: string]: unknown;
  }
  export interface Artifacts {
    method?: string;
    host?: string;
    port?: number | string;
    resource?: string;
    ts: string | number;
    nonce?: string;
    hash?: string;
    ext?: string;
    mac?: string;
    id?: string;
  }
  export interface RequestLike {
    method: string;
    url: string;
    host: string;
    port: number | string;
    authorization?: string;
    contentType?: string;
  }
  export interface ServerOptions {
    timestampSkewSec?: number;
    localtimeOffsetMsec?: number;
    nonceFunc?: (key: string, nonce: string, ts: string) => void | Promise<void>;
    payload?: string;
    host?: string;
    port?: number | string;
  }
  type CredentialsFunc = (id: string) => Promise<Credentials | undefined> | Credentials | undefined;
  export const server: {
    authenticate(req: RequestLike, credentialsFunc: CredentialsFunc, options?: ServerOptions): Promise<{ credentials: Credentials; artifacts: Artifacts }>;
    authenticatePayload(payload: string, credentials: Credentials, artifacts: Artifacts, contentType: string): void;
    authenticateBewit(req: RequestLike, credentialsFunc: CredentialsFunc, options?: ServerOptions): Promise<{ credentials: Credentials; attributes: { id: string; exp: string; mac: string; ext?: string } }>;
  };
  export const client: {
    header(uri: string, method: string, options: { credentials: Credentials; ext?: string; payload?: string; contentType?: string; timestamp?: number; nonce?: string; localtimeOffsetMsec?: number }): { header: string; artifacts: Artifacts };
    getBewit(uri: string, options: { credentials: Credentials; ttlSec: number; ext?: string }): string;
  };
  export const utils: {
    parseAuthorizationHeader(header: string | undefined, keys?: string[]): Record<string, string> & { id?: string; ext?: string };
  };
  export const crypto: {
    /** A hash fed the payload in pieces: `hawk.1.payload\n<content type>\n` is already in it. */
    initializePayloadHash(algorithm: 'sha256', contentType: string): import('node:crypto').Hash;
    /** Adds the closing newline and returns the base64 digest, as the header's `hash` holds it. */
    finalizePayloadHash(hash: import('node:crypto').Hash): string;
  };
  const hawk: { server: typeof server; client: typeof client; utils: typeof utils; crypto: typeof crypto };
  export default hawk;
}
