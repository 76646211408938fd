// Signed actions with their outcome shown next to them (a refused one names the missing scope).
import { useState } from 'preact/hooks';
import { apiSigned, describeError, type Service } from '../api';
import { useCredentials } from './SignIn';

export interface ActionSpec {
  service: Service;
  method: string;
  path: string;
  body?: unknown;
  /** What to say when it worked. */
  done: (answer: unknown) => string;
}

/** Runs actions and remembers the last outcome. */
export function useAction() {
  const [result, setResult] = useState<{ ok: boolean; text: string }>();
  const [busy, setBusy] = useState(false);
  /** Resolves to whether the action was accepted. */
  const run = async (spec: ActionSpec): Promise<boolean> => {
    setBusy(true);
    setResult(undefined);
    try {
      const answer = await apiSigned(spec.service, spec.method, spec.path, spec.body);
      setResult({ ok: true, text: spec.done(answer) });
      return true;
    } catch (err) {
      setResult({ ok: false, text: describeError(err) });
      return false;
    } finally {
      setBusy(false);
    }
  };
  return { result, busy, run, clear: () => setResult(undefined), fail: (text: string) => setResult({ ok: false, text }) };
}

export function ActionResult({ result }: { result: { ok: boolean; text: string } | undefined }) {
  if (!result) return null;
  return (
    <p class={`action-result ${result.ok ? 'ok' : 'error'}`} role={result.ok ? 'status' : 'alert'}>
      {result.text}
    </p>
  );
}

/** A button that asks once more before it acts (no browser dialogs). */
export function ConfirmButton(props: { label: string; confirm: string; onConfirm: () => void; disabled?: boolean; name: string; title?: string }) {
  const { label, confirm, onConfirm, disabled, name, title } = props;
  const [asking, setAsking] = useState(false);
  if (!asking) {
    return (
      <button name={name} disabled={disabled} title={title} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <span class="confirm">
      {confirm}{' '}
      <button
        name={`${name}-confirm`}
        class="danger"
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        Yes
      </button>{' '}
      <button onClick={() => setAsking(false)}>No</button>
    </span>
  );
}

/** Why an action button is disabled while signed out (its tooltip; SignInHint says it beside the buttons). */
export const SIGNED_OUT = 'Sign in (top right) to act: requests are signed with your credentials.';

/**
 * Whether actions can be taken, and the tooltip of their buttons: signed out, every action button is disabled (it
 * would only be refused) and says why.
 */
export function useActionsEnabled(): { enabled: boolean; title: string | undefined } {
  const credentials = useCredentials();
  return { enabled: credentials !== undefined, title: credentials ? undefined : SIGNED_OUT };
}

export function SignInHint() {
  const credentials = useCredentials();
  return credentials ? null : (
    <p class="muted signin-hint" role="note">
      {SIGNED_OUT}
    </p>
  );
}
