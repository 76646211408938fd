// /ui/index/<namespace>: the index service (Taskcluster's index) browsed a namespace at a time: the namespaces under
// it (each a link one level down) and the tasks indexed directly in it (each a link to its task page), through the
// index API's list endpoints (listNamespaces, listTasks). Their `index:list-*` scopes are the anonymous role's in a
// new deployment (as Taskcluster's index reads are public); the page signs them when signed in, for a deployment
// that took them away from anonymous, and says to sign in when refused.
import { useEffect, useState } from 'preact/hooks';
import { apiGet, apiSigned, describeError } from '../api';
import { useCredentials } from '../components/SignIn';
import { TableHead } from '../components/TableHead';
import { ago } from '../components/format';
import { href } from '../router';

interface Namespace {
  namespace: string;
  name: string;
  expires: string;
}
interface Entry {
  namespace: string;
  taskId: string;
  rank: number;
  expires: string;
}
/** The largest page the index API answers; a namespace with more shows `more…`. */
const LIMIT = 1000;

const segments = (namespace: string) => (namespace ? `/${namespace.split('.').map(encodeURIComponent).join('.')}` : '');

export function IndexPage({ namespace }: { namespace: string }) {
  const credentials = useCredentials();
  const [answer, setAnswer] = useState<{ namespaces: Namespace[]; tasks: Entry[]; more: boolean }>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    let stopped = false;
    setAnswer(undefined);
    setError(undefined);
    const get = <T,>(path: string) => (credentials ? apiSigned<T>('index', 'GET', path) : apiGet<T>('index', path));
    Promise.all([
      get<{ namespaces: Namespace[]; continuationToken?: string }>(`/namespaces${segments(namespace)}?limit=${LIMIT}`),
      get<{ tasks: Entry[]; continuationToken?: string }>(`/tasks${segments(namespace)}?limit=${LIMIT}`),
    ]).then(
      ([n, t]) => !stopped && setAnswer({ namespaces: n.namespaces, tasks: t.tasks, more: Boolean(n.continuationToken || t.continuationToken) }),
      (err: unknown) => !stopped && setError(`${describeError(err)}${credentials ? '' : ' Sign in (top right): listing the index needs its scopes.'}`),
    );
    return () => {
      stopped = true;
    };
  }, [namespace, credentials?.clientId]);
  const parts = namespace ? namespace.split('.') : [];
  return (
    <div class="list-page index-page">
      <div class="list-head">
        <h1>Index</h1>
        <nav class="crumbs" aria-label="namespace">
          <a href={href('index')}>(root)</a>
          {parts.map((p, i) => (
            <span key={i}>
              {' . '}
              <a href={href(`index/${parts.slice(0, i + 1).join('.')}`)}>{p}</a>
            </span>
          ))}
        </nav>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {!answer && !error && <p class="muted">Loading…</p>}
      {answer && answer.namespaces.length === 0 && answer.tasks.length === 0 && (
        <p class="muted empty">Nothing is indexed {namespace ? `under ${namespace}` : 'yet'}: a task indexes itself with a route `index.&lt;namespace&gt;.&lt;name&gt;`.</p>
      )}
      {answer && answer.namespaces.length > 0 && (
        <section>
          <h2>Namespaces</h2>
          <ul class="namespaces">
            {answer.namespaces.map((n) => (
              <li key={n.namespace} data-namespace={n.namespace}>
                <a href={href(`index/${n.namespace}`)}>{n.name}</a> <span class="muted small">expires {ago(n.expires)}</span>
              </li>
            ))}
          </ul>
        </section>
      )}
      {answer && answer.tasks.length > 0 && (
        <section>
          <h2>Tasks</h2>
          <table class="indexed">
            <TableHead columns={['index path', 'task', 'rank', 'expires']} />
            <tbody>
              {answer.tasks.map((t) => (
                <tr key={t.namespace} data-index-path={t.namespace}>
                  <td class="mono">{t.namespace}</td>
                  <td>
                    <a href={href(`task/${t.taskId}`)} class="mono">
                      {t.taskId}
                    </a>
                  </td>
                  <td class="num">{t.rank}</td>
                  <td title={t.expires}>{t.expires.slice(0, 10)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {answer?.more && <p class="muted">Only the first {LIMIT} of each are shown.</p>}
    </div>
  );
}
