// The graph explorer: routes, header with sign-in, pages.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { SignInControl, verifyCredentials } from './components/SignIn';
import { GraphPage } from './pages/GraphPage';
import { HooksPage } from './pages/HooksPage';
import { IndexPage } from './pages/IndexPage';
import { ListPage } from './pages/ListPage';
import { TaskPage } from './pages/TaskPage';
import { currentRoute, href, interceptLinks, onRouteChange } from './router';
import { setCredentials, takeSigninFragment } from './session';
import './styles.css';

function Route({ path, query }: { path: string; query: URLSearchParams }) {
  const graph = /^task-graph\/([A-Za-z0-9_-]+)$/.exec(path);
  if (graph) return <GraphPage key={graph[1]} taskGraphId={graph[1]} />;
  const task = /^task\/([A-Za-z0-9_-]+)$/.exec(path);
  if (task) return <TaskPage key={task[1]} taskId={task[1]} />;
  if (path === '') return <ListPage query={query} />;
  if (path === 'hooks') return <HooksPage />;
  const index = /^index(?:\/([^/]*))?$/.exec(path);
  if (index) return <IndexPage key={index[1] ?? ''} namespace={index[1] ?? ''} />;
  return (
    <div class="list-page">
      <h1>Not found</h1>
      <p>
        No page at <code>{path}</code>. <a href={href('./')}>All task graphs</a>
      </p>
    </div>
  );
}

function App() {
  const [route, setRoute] = useState(currentRoute());
  const [notice, setNotice] = useState<string>();
  useEffect(() => onRouteChange(() => setRoute(currentRoute())), []);
  useEffect(() => {
    // A sign-in link: `#signin?clientId=..&accessToken=..` (printed by `tgs dev`), opened or pasted into this tab.
    const signIn = () => {
      const credentials = takeSigninFragment();
      if (!credentials) return;
      void verifyCredentials(credentials).then((result) => {
        if (result.ok) {
          setCredentials(credentials);
          setNotice(undefined);
        } else {
          setNotice(`The sign-in link was refused. ${result.message}`);
        }
      });
    };
    signIn();
    addEventListener('hashchange', signIn);
    return () => removeEventListener('hashchange', signIn);
  }, []);
  return (
    <>
      <nav class="top">
        <a href={href('./')} class="brand">
          tgs
        </a>
        <a href={href('./')}>Task graphs</a>
        <a href={href('hooks')}>Hooks</a>
        <a href={href('index')}>Index</a>
        <span class="grow" />
        <SignInControl notice={notice} />
      </nav>
      <main>
        <Route path={route.path} query={route.query} />
      </main>
    </>
  );
}

interceptLinks();
render(<App />, document.getElementById('app') as HTMLElement);
