// The ids the CLI is given, checked before any request, and the hint when one names the other kind of thing.
import { describeApiError, type ResolvedCredentials } from '../client/credentials.js';
import { GraphNotFinishedError, TgsApiError, TgsClient } from '../client/tgsClient.js';
import { SLUGID } from '../api/patterns.js';

export type IdKind = 'taskId' | 'taskGraphId';

/** Throws, in words, when `value` cannot be a taskId / taskGraphId (a slugid). */
export function checkId(value: string, kind: IdKind): void {
  if (SLUGID.test(value)) return;
  const length = value.length === 22 ? 'has 22 characters but is not one slugid.nice() makes' : `has ${value.length} character(s)`;
  throw new Error(`\`${value}\` is not a ${kind}: a ${kind} is a slugid, 22 characters of A-Z, a-z, 0-9, _ and - (this one ${length})`);
}

/** When a 404 came back for `id`, whether it names the other kind: the sentence that says so, else undefined. */
async function otherKind(client: TgsClient, id: string, kind: IdKind): Promise<string | undefined> {
  if (kind === 'taskId') {
    const graph = await client.graphStatus(id).catch(() => undefined);
    if (!graph) return undefined;
    return `${id} is a task-graph id, not a taskId: tgs graph inspect ${id} lists its tasks, and a task of it is named by its label (e.g. tgs task log ${id} <label>)`;
  }
  const task = await client.taskStatus(id).catch(() => undefined);
  if (!task) return undefined;
  return `${id} is a taskId, not a task-graph id: its task group is ${task.taskGroupId} (tgs graph status ${task.taskGroupId}; tgs task status ${id})`;
}

/**
 * `withClient` for commands given ids: each id is checked first (no request for `nope`), and a 404 for an id that
 * names the other kind of thing (a task-graph id given as a taskId, or the reverse) says so.
 */
export async function withIds<T>(
  resolved: ResolvedCredentials,
  ids: Partial<Record<IdKind, string>>,
  fn: (client: TgsClient) => Promise<T>,
): Promise<T> {
  for (const kind of ['taskGraphId', 'taskId'] as const) if (ids[kind] !== undefined) checkId(ids[kind], kind);
  const client = new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials });
  try {
    return await fn(client);
  } catch (err) {
    if (err instanceof GraphNotFinishedError) throw err;
    if (err instanceof TgsApiError && err.status === 404) {
      for (const kind of ['taskGraphId', 'taskId'] as const) {
        const hint = ids[kind] !== undefined ? await otherKind(client, ids[kind], kind) : undefined;
        if (hint) throw new Error(hint);
      }
    }
    throw new Error(describeApiError(err, resolved));
  }
}
