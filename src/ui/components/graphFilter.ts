// The list page's search over task graphs: by name or id, owner, how long the graph took, and "mine". Pure (imported
// by node's unit tests: no DOM).

/** How many of the newest graphs a search looks through (the API's largest page). */
export const SEARCH_WINDOW = 1000;

export interface GraphSearch {
  /** a part of the name or of the taskGraphId, any case */
  text: string;
  /** a part of metadata.owner, any case */
  owner: string;
  /** only graphs that took (or have run for) at least this many minutes; 0 for any */
  minMinutes: number;
  /** only graphs whose owner is the signed-in clientId */
  mine: boolean;
}

export interface ListedGraph {
  status: { taskGraphId: string; state: string };
  name: string;
  owner: string;
  /** who submitted it (the API's listTaskGraphs): "mine" is the signed-in clientId's graphs */
  submittedBy: string;
  created: string;
  updated: string;
}

export function searchOf(query: URLSearchParams): GraphSearch {
  const minutes = Number(query.get('minMinutes') ?? '');
  return {
    text: query.get('q') ?? '',
    owner: query.get('owner') ?? '',
    minMinutes: Number.isFinite(minutes) && minutes > 0 ? minutes : 0,
    mine: query.get('mine') === '1',
  };
}

/** A live graph's time so far; an ended one's from creation to its last change (when it ended). */
export function graphDurationMs(g: ListedGraph, now: number): number {
  const live = g.status.state === 'running' || g.status.state === 'blocked';
  return (live ? now : Date.parse(g.updated)) - Date.parse(g.created);
}

export function matchesSearch(g: ListedGraph, search: GraphSearch, clientId: string | undefined, now: number): boolean {
  const text = search.text.toLowerCase();
  if (text && !g.name.toLowerCase().includes(text) && !g.status.taskGraphId.toLowerCase().includes(text)) return false;
  if (search.owner && !g.owner.toLowerCase().includes(search.owner.toLowerCase())) return false;
  if (search.minMinutes > 0 && graphDurationMs(g, now) < search.minMinutes * 60_000) return false;
  if (search.mine && (!clientId || g.submittedBy !== clientId)) return false;
  return true;
}
