import { useEffect, useState } from 'preact/hooks';
import { apiSigned, ApiError, describeError } from '../api';
import type { HawkCredentials } from '../hawk';
import { getCredentials, onCredentialsChange, setCredentials } from '../session';

/**
 * Checks credentials with a signed request. 401 means they are wrong; 403 means they are right but the client
 * may not read its own scopes, which is fine for signing in.
 */
export async function verifyCredentials(credentials: HawkCredentials): Promise<{ ok: true; scopes?: string[] } | { ok: false; message: string }> {
  try {
    const { scopes } = await apiSigned<{ scopes: string[] }>('auth', 'GET', '/scopes/current', undefined, credentials);
    return { ok: true, scopes };
  } catch (err) {
    if (err instanceof ApiError && err.status === 403) return { ok: true };
    return { ok: false, message: describeError(err) };
  }
}

export function useCredentials(): HawkCredentials | undefined {
  const [credentials, set] = useState(getCredentials());
  useEffect(() => onCredentialsChange(() => set(getCredentials())), []);
  return credentials;
}

function SignInForm({ onDone }: { onDone: () => void }) {
  const [clientId, setClientId] = useState('');
  const [accessToken, setAccessToken] = useState('');
  const [certificate, setCertificate] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    const credentials: HawkCredentials = { clientId: clientId.trim(), accessToken: accessToken.trim(), ...(certificate.trim() ? { certificate: certificate.trim() } : {}) };
    const result = await verifyCredentials(credentials);
    setBusy(false);
    if (!result.ok) {
      setError(`Sign-in failed. ${result.message}`);
      return;
    }
    setCredentials(credentials);
    onDone();
  };
  return (
    <form class="signin-form" onSubmit={submit}>
      <label>
        clientId <input name="clientId" value={clientId} onInput={(e) => setClientId(e.currentTarget.value)} required autoComplete="username" />
      </label>
      <label>
        accessToken <input name="accessToken" type="password" value={accessToken} onInput={(e) => setAccessToken(e.currentTarget.value)} required autoComplete="current-password" />
      </label>
      <details>
        <summary>temporary credentials</summary>
        <label>
          certificate <textarea name="certificate" value={certificate} onInput={(e) => setCertificate(e.currentTarget.value)} rows={3} />
        </label>
      </details>
      <div class="buttons">
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
        <button type="button" onClick={onDone}>
          Close
        </button>
      </div>
      <p class="hint">Kept in this tab only (sessionStorage); actions are signed with Hawk.</p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </form>
  );
}

/** The header's sign-in state: who is signed in, or a button that opens the form. */
export function SignInControl({ notice }: { notice?: string }) {
  const credentials = useCredentials();
  const [open, setOpen] = useState(false);
  return (
    <div class="signin">
      {notice && (
        <span class="error" role="alert">
          {notice}
        </span>
      )}
      {credentials && !open ? (
        <span>
          Signed in as <b class="client-id">{credentials.clientId}</b>{' '}
          <button onClick={() => setCredentials(undefined)}>Sign out</button>
        </span>
      ) : open ? (
        <SignInForm onDone={() => setOpen(false)} />
      ) : (
        <button onClick={() => setOpen(true)}>Sign in</button>
      )}
    </div>
  );
}
