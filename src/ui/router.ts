// Client-side routes under <rootUrl>/ui/: '' (graphs), 'task-graph/<id>', 'task/<id>', 'hooks', 'index[/<namespace>]'. The server answers every
// /ui/ path with index.html, so any of these can be opened or reloaded directly.
const listeners = new Set<() => void>();

const basePath = () => new URL(document.baseURI).pathname;

/** The route: the path below /ui/, e.g. `task-graph/abc`. */
export function currentRoute(): { path: string; query: URLSearchParams } {
  const base = basePath();
  const path = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : '';
  return { path: decodeURIComponent(path.replace(/\/+$/, '')), query: new URLSearchParams(location.search) };
}

/** A link target for a route (relative to <base>). */
export function href(route: string): string {
  const url = new URL(route, document.baseURI);
  return url.pathname + url.search;
}

export function navigate(route: string, replace = false): void {
  const url = new URL(route, document.baseURI);
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  for (const fn of listeners) fn();
}

export function onRouteChange(fn: () => void): () => void {
  listeners.add(fn);
  const pop = () => fn();
  addEventListener('popstate', pop);
  return () => {
    listeners.delete(fn);
    removeEventListener('popstate', pop);
  };
}

/** Same-page navigation for plain left clicks on links into the UI. */
export function interceptLinks(): void {
  document.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const a = (event.target as Element | null)?.closest?.('a');
    if (!a || a.target || a.hasAttribute('download')) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith(basePath())) return;
    event.preventDefault();
    navigate(url.pathname.slice(basePath().length) + url.search);
  });
}
