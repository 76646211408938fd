// Hawk request signing (https://github.com/mozilla/hawk, header scheme v1) with WebCrypto, as Taskcluster's web
// client signs requests: HMAC-SHA256 over the normalized request, an optional payload hash, and Taskcluster's
// `ext` (base64 JSON carrying a temporary credential's certificate). No imports: it runs in the browser and,
// for its test against the `hawk` package, in Node.

export interface HawkCredentials {
  clientId: string;
  accessToken: string;
  /** A temporary credential's certificate, as JSON text. */
  certificate?: string;
}

export interface HawkOptions {
  /** The exact body sent; when given its hash is signed too. */
  payload?: string;
  contentType?: string;
  /** Seconds since the epoch (default: now). */
  ts?: number;
  nonce?: string;
}

const encoder = new TextEncoder();

function base64(bytes: ArrayBuffer): string {
  let binary = '';
  for (const b of new Uint8Array(bytes)) binary += String.fromCharCode(b);
  return btoa(binary);
}

/** base64 of UTF-8 text (btoa alone only takes Latin-1). */
export function base64Text(text: string): string {
  let binary = '';
  for (const b of encoder.encode(text)) binary += String.fromCharCode(b);
  return btoa(binary);
}

function randomNonce(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join('');
}

async function payloadHash(payload: string, contentType: string): Promise<string> {
  const mime = contentType.split(';')[0].trim().toLowerCase();
  const digest = await crypto.subtle.digest('SHA-256', encoder.encode(`hawk.1.payload\n${mime}\n${payload}\n`));
  return base64(digest);
}

/** The `Authorization` header value for `method url`. */
export async function hawkHeader(url: string, method: string, credentials: HawkCredentials, options: HawkOptions = {}): Promise<string> {
  const u = new URL(url);
  const ts = options.ts ?? Math.floor(Date.now() / 1000);
  const nonce = options.nonce ?? randomNonce();
  const port = u.port || (u.protocol === 'http:' ? '80' : '443');
  const hash = options.payload !== undefined ? await payloadHash(options.payload, options.contentType ?? '') : '';
  const ext = credentials.certificate ? base64Text(JSON.stringify({ certificate: JSON.parse(credentials.certificate) })) : '';
  const normalized =
    `hawk.1.header\n${ts}\n${nonce}\n${method.toUpperCase()}\n${u.pathname}${u.search}\n${u.hostname.toLowerCase()}\n${port}\n${hash}\n` +
    `${ext.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n`;
  const key = await crypto.subtle.importKey('raw', encoder.encode(credentials.accessToken), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = base64(await crypto.subtle.sign('HMAC', key, encoder.encode(normalized)));
  return (
    `Hawk id="${credentials.clientId}", ts="${ts}", nonce="${nonce}"` +
    (hash ? `, hash="${hash}"` : '') +
    (ext ? `, ext="${ext}"` : '') +
    `, mac="${mac}"`
  );
}
