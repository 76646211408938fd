// Credentials for signed actions: entered once (sign-in form or the `#signin?clientId=..&accessToken=..` link
// that `tgs dev` prints; a fragment never reaches a server log) and kept in sessionStorage, so they are gone
// when the tab closes.
import type { HawkCredentials } from './hawk';

const KEY = 'tgs-credentials';
const listeners = new Set<() => void>();

export function getCredentials(): HawkCredentials | undefined {
  try {
    const raw = sessionStorage.getItem(KEY);
    const parsed = raw ? (JSON.parse(raw) as HawkCredentials) : undefined;
    return parsed?.clientId && parsed.accessToken ? parsed : undefined;
  } catch {
    return undefined;
  }
}

export function setCredentials(credentials: HawkCredentials | undefined): void {
  if (credentials) sessionStorage.setItem(KEY, JSON.stringify(credentials));
  else sessionStorage.removeItem(KEY);
  for (const fn of listeners) fn();
}

export function onCredentialsChange(fn: () => void): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

/**
 * Reads `#signin?clientId=..&accessToken=..[&certificate=..]` from the address, removes it from the address
 * bar and history, and returns the credentials it held.
 */
export function takeSigninFragment(): HawkCredentials | undefined {
  const hash = location.hash;
  if (!hash.startsWith('#signin')) return undefined;
  const params = new URLSearchParams(hash.slice(hash.indexOf('?') + 1));
  history.replaceState(history.state, '', location.pathname + location.search);
  const clientId = params.get('clientId') ?? '';
  const accessToken = params.get('accessToken') ?? '';
  if (!clientId || !accessToken) return undefined;
  const certificate = params.get('certificate') ?? undefined;
  return { clientId, accessToken, ...(certificate ? { certificate } : {}) };
}
